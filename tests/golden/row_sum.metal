// simd_shuffle_xor likewise: a butterfly step, after which every lane holds the combined value.
template <typename T> inline T lt_shuffle_xor(T v, ushort m) { return metal::simd_shuffle_xor(v, m); }
inline bool lt_shuffle_xor(bool v, ushort m) { return metal::simd_shuffle_xor(uint(v), m) != 0; }
inline int64_t lt_shuffle_xor(int64_t v, ushort m) {
    uint2 h = as_type<uint2>(v);
    return as_type<int64_t>(uint2(metal::simd_shuffle_xor(h.x, m), metal::simd_shuffle_xor(h.y, m)));
}
[[kernel]] void custom_kernel_lt_61e72b3d0f96_float_float_float(
  const device float* a0 [[buffer(0)]],
  const device float* a1 [[buffer(1)]],
  device float* a2 [[buffer(2)]],
  uint simdgroup_index_in_threadgroup [[simdgroup_index_in_threadgroup]],
  uint thread_index_in_simdgroup [[thread_index_in_simdgroup]],
  uint3 threadgroup_position_in_grid [[threadgroup_position_in_grid]]) {
// rows: k0_reduce, reduce, outer [6] x inner [40]; geometry threads=192 groups=1 rows=6 per_thread=0
const int32_t o = int32_t(threadgroup_position_in_grid.x) * 6 + int32_t(simdgroup_index_in_threadgroup);
if (o >= 6) return;   // a whole simdgroup: no barrier follows
const uint lt_lid = thread_index_in_simdgroup;
const uint lt_lsize = 32;
const int32_t o0 = o;
float acc4 = 0;
for (int32_t i = lt_lid; i < 40; i += 32) {   // constant stride: unrolled, loads in flight
    const int32_t i0 = i;
    const float v1 = a0[o0 * 40 + i0];
    const float v2 = a1[o0 * 40 + i0];
    const float v3 = (v1 * v2);
    acc4 += v3;
}
acc4 = simd_sum(acc4);

a2[o0] = acc4;

}
