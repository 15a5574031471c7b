// simd_shuffle_xor likewise: a butterfly step, after which every lane holds the combined value.
template <typename T> inline T lt_shuffle_xor(T v, ushort m) { return metal::simd_shuffle_xor(v, m); }
inline bool lt_shuffle_xor(bool v, ushort m) { return metal::simd_shuffle_xor(uint(v), m) != 0; }
inline int64_t lt_shuffle_xor(int64_t v, ushort m) {
    uint2 h = as_type<uint2>(v);
    return as_type<int64_t>(uint2(metal::simd_shuffle_xor(h.x, m), metal::simd_shuffle_xor(h.y, m)));
}
[[kernel]] void custom_kernel_lt_ec1c81735354_float_float(
  const device float* a0 [[buffer(0)]],
  device float* a1 [[buffer(1)]],
  uint simdgroup_index_in_threadgroup [[simdgroup_index_in_threadgroup]],
  uint thread_index_in_simdgroup [[thread_index_in_simdgroup]],
  uint3 threadgroup_position_in_grid [[threadgroup_position_in_grid]]) {
// rows: k0_row, row, outer [6] x inner [40]; geometry threads=192 groups=1 rows=6 per_thread=4 vec=4
const int32_t o = int32_t(threadgroup_position_in_grid.x) * 6 + int32_t(simdgroup_index_in_threadgroup);
if (o >= 6) return;   // a whole simdgroup: no barrier follows
const uint lt_lid = thread_index_in_simdgroup;
const uint lt_lsize = 32;
const int32_t o0 = o;
float lt_c0[4];   // this thread's elements of the row, read once
float lt_row0[4];   // costly values kept for a later pass
float acc2 = -INFINITY;
int acc2_nan = 0;
for (uint lt_k = 0; lt_k < 1; lt_k++) {
    const int32_t lt_b = int32_t((lt_lid + lt_k * 32) * 4);
    if (lt_b >= 40) break;   // rows are a multiple of 4 long: a step is whole
    float lt_l0[4]; for (uint lt_e = 0; lt_e < 4; lt_e++) lt_l0[lt_e] = a0[o0 * 40 + lt_b + lt_e];
    for (uint lt_q = 0; lt_q < 4; lt_q++) {
        const uint lt_j = lt_k * 4 + lt_q;
        const int32_t i = lt_b + int32_t(lt_q);
        const int32_t i0 = i;
        const float v1 = lt_l0[lt_q]; lt_c0[lt_j] = v1;
        acc2 = v1 > acc2 ? v1 : acc2;
        acc2_nan |= v1 != v1;
    }
}
acc2 = simd_max(acc2);
acc2_nan = simd_max(acc2_nan);

if (acc2_nan) acc2 = NAN;
float acc6 = 0;
for (uint lt_k = 0; lt_k < 1; lt_k++) {
    const int32_t lt_b = int32_t((lt_lid + lt_k * 32) * 4);
    if (lt_b >= 40) break;   // rows are a multiple of 4 long: a step is whole
    for (uint lt_q = 0; lt_q < 4; lt_q++) {
        const uint lt_j = lt_k * 4 + lt_q;
        const int32_t i = lt_b + int32_t(lt_q);
        const int32_t i0 = i;
        const float v3 = lt_c0[lt_j];
        const float v4 = (v3 - acc2);
        const float v5 = metal::precise::exp(v4);
        lt_row0[lt_j] = v5;
        acc6 += v5;
    }
}
acc6 = simd_sum(acc6);

for (uint lt_k = 0; lt_k < 1; lt_k++) {
    const int32_t lt_b = int32_t((lt_lid + lt_k * 32) * 4);
    if (lt_b >= 40) break;   // rows are a multiple of 4 long: a step is whole
    float lt_s1[4];
    for (uint lt_q = 0; lt_q < 4; lt_q++) {
        const uint lt_j = lt_k * 4 + lt_q;
        const int32_t i = lt_b + int32_t(lt_q);
        const int32_t i0 = i;
        const float v7 = lt_row0[lt_j];
        const float v8 = (v7 / acc6);
        lt_s1[lt_q] = v8;
    }
    for (uint lt_e = 0; lt_e < 4; lt_e++) a1[o0 * 40 + lt_b + lt_e] = lt_s1[lt_e];
}

}
