inline float lt_sigmoid_f32(float x) { return 1.0f / (1.0f + metal::precise::exp(-x)); }
[[kernel]] void custom_kernel_lt_6bc4932e0b30_floatc_float_floatc_float(
  const constant float* a0 [[buffer(0)]],
  const device float* a1 [[buffer(1)]],
  const constant float* a2 [[buffer(2)]],
  device float* a3 [[buffer(3)]],
  uint3 thread_position_in_grid [[thread_position_in_grid]]) {
// linear: k0_pointwise, pointwise over 240 contiguous elements, one thread each
const int32_t i = int32_t(thread_position_in_grid.x);
if (i >= 240) return;
const float v2 = a0[0];
const float v3 = float(v2);
const float v6 = a2[0];
const float v7 = float(v6);
const float v1 = a1[i];
const float v4 = (v1 * v3);
const float v5 = metal::precise::exp(v4);
const float v8 = (v5 + v7);
const float v9 = lt_sigmoid_f32(v8);
a3[i] = v9;

}
