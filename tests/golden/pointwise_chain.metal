inline float lt_sigmoid_f32(float x) { return 1.0f / (1.0f + metal::precise::exp(-x)); }
[[kernel]] void custom_kernel_lt_7e6c1d37d9c7_floatc_float_floatc_float(
  const constant float* a0 [[buffer(0)]],
  const device float* a1 [[buffer(1)]],
  const constant float* a2 [[buffer(2)]],
  device float* a3 [[buffer(3)]],
  uint3 thread_position_in_grid [[thread_position_in_grid]]) {
// linear: k0_pointwise, pointwise over 240 contiguous elements; geometry threads=256 groups=1 rows=1 per_thread=4 vec=4
const int32_t lt_tid = int32_t(thread_position_in_grid.x);
const float v2 = a0[0];
const float v3 = float(v2);
const float v6 = a2[0];
const float v7 = float(v6);
for (int32_t lt_base = lt_tid * 4; lt_base < 240; lt_base += 1024) {
    if (lt_base + 4 <= 240) {
        for (int lt_q = 0; lt_q < 4; lt_q++) {
            const int32_t i = int32_t(lt_base + lt_q);
            const float v1 = a1[i];
            const float v4 = (v1 * v3);
            const float v5 = metal::precise::exp(v4);
            const float v8 = (v5 + v7);
            const float v9 = lt_sigmoid_f32(v8);
            a3[i] = v9;
        }
    } else {
        for (int32_t lt_i = lt_base; lt_i < 240 && lt_i < lt_base + 4; lt_i++) {
            const int32_t i = int32_t(lt_i);
            const float v1 = a1[i];
            const float v4 = (v1 * v3);
            const float v5 = metal::precise::exp(v4);
            const float v8 = (v5 + v7);
            const float v9 = lt_sigmoid_f32(v8);
            a3[i] = v9;
        }
    }
}

}
