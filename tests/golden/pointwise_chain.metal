inline float lt_sigmoid_f32(float x) { return 1.0f / (1.0f + metal::precise::exp(-x)); }
[[kernel]] void custom_kernel_lt_6a638199fc7a_float_floatc_floatc_float(
  const device float* a0 [[buffer(0)]],
  const constant float* a1 [[buffer(1)]],
  const constant float* a2 [[buffer(2)]],
  device float* a3 [[buffer(3)]],
  uint3 thread_position_in_grid [[thread_position_in_grid]]) {
// linear: k0_pointwise, pointwise over 240 contiguous elements; geometry threads=256 groups=1 rows=1 per_thread=4 vec=4
const int32_t lt_tid = int32_t(thread_position_in_grid.x);
const float v2 = a1[0];
const float v5 = a2[0];
for (int32_t lt_base = lt_tid * 4; lt_base < 240; lt_base += 1024) {
    if (lt_base + 4 <= 240) {
        for (int lt_q = 0; lt_q < 4; lt_q++) {
            const int32_t i = int32_t(lt_base + lt_q);
            const float v1 = a0[i];
            const float v3 = (v1 * v2);
            const float v4 = metal::precise::exp(v3);
            const float v6 = (v4 + v5);
            const float v7 = lt_sigmoid_f32(v6);
            a3[i] = v7;
        }
    } else {
        for (int32_t lt_i = lt_base; lt_i < 240 && lt_i < lt_base + 4; lt_i++) {
            const int32_t i = int32_t(lt_i);
            const float v1 = a0[i];
            const float v3 = (v1 * v2);
            const float v4 = metal::precise::exp(v3);
            const float v6 = (v4 + v5);
            const float v7 = lt_sigmoid_f32(v6);
            a3[i] = v7;
        }
    }
}

}
