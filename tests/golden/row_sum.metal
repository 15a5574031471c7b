// simd_shuffle_xor likewise: a butterfly step, after which every lane holds the combined value.
template <typename T> inline T lt_shuffle_xor(T v, ushort m) { return metal::simd_shuffle_xor(v, m); }
inline bool lt_shuffle_xor(bool v, ushort m) { return metal::simd_shuffle_xor(uint(v), m) != 0; }
inline int64_t lt_shuffle_xor(int64_t v, ushort m) {
    uint2 h = as_type<uint2>(v);
    return as_type<int64_t>(uint2(metal::simd_shuffle_xor(h.x, m), metal::simd_shuffle_xor(h.y, m)));
}
[[kernel]] void custom_kernel_lt_02fc303133ae_float_float_float(
  const device float* a0 [[buffer(0)]],
  const device float* a1 [[buffer(1)]],
  device float* a2 [[buffer(2)]],
  uint simdgroup_index_in_threadgroup [[simdgroup_index_in_threadgroup]],
  uint thread_index_in_simdgroup [[thread_index_in_simdgroup]],
  uint3 threadgroup_position_in_grid [[threadgroup_position_in_grid]]) {
// rows: k0_reduce, reduce, outer [6] x inner [40]; geometry threads=192 groups=1 rows=6 per_thread=0 vec=4
const int32_t o = int32_t(threadgroup_position_in_grid.x) * 6 + int32_t(simdgroup_index_in_threadgroup);
if (o >= 6) return;   // a whole simdgroup: no barrier follows
const uint lt_lid = thread_index_in_simdgroup;
const uint lt_lsize = 32;
const int32_t o0 = o;
float acc4 = 0;
for (int32_t lt_b = int32_t(lt_lid * 4); lt_b < 40; lt_b += 128) {
    float lt_l0[4]; for (uint lt_e = 0; lt_e < 4; lt_e++) lt_l0[lt_e] = a0[o0 * 40 + lt_b + lt_e];
    float lt_l1[4]; for (uint lt_e = 0; lt_e < 4; lt_e++) lt_l1[lt_e] = a1[o0 * 40 + lt_b + lt_e];
    for (uint lt_q = 0; lt_q < 4; lt_q++) {
        const int32_t i = lt_b + int32_t(lt_q);
        const int32_t i0 = i;
        const float v1 = lt_l0[lt_q];
        const float v2 = lt_l1[lt_q];
        const float v3 = (v1 * v2);
        acc4 += v3;
    }
}
acc4 = simd_sum(acc4);

a2[o0] = acc4;

}
