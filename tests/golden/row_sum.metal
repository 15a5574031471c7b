// simd_shuffle_down for every register type: 64-bit values move as two 32-bit halves.
template <typename T> inline T lt_shuffle_down(T v, ushort d) { return metal::simd_shuffle_down(v, d); }
inline bool lt_shuffle_down(bool v, ushort d) { return metal::simd_shuffle_down(uint(v), d) != 0; }
inline int64_t lt_shuffle_down(int64_t v, ushort d) {
    uint2 h = as_type<uint2>(v);
    return as_type<int64_t>(uint2(metal::simd_shuffle_down(h.x, d), metal::simd_shuffle_down(h.y, d)));
}
[[kernel]] void custom_kernel_lt_f91d3678fa45_float_float_float(
  const device float* a0 [[buffer(0)]],
  const device float* a1 [[buffer(1)]],
  device float* a2 [[buffer(2)]],
  uint simdgroup_index_in_threadgroup [[simdgroup_index_in_threadgroup]],
  uint thread_index_in_simdgroup [[thread_index_in_simdgroup]],
  uint3 thread_position_in_threadgroup [[thread_position_in_threadgroup]],
  uint3 threadgroup_position_in_grid [[threadgroup_position_in_grid]],
  uint3 threads_per_threadgroup [[threads_per_threadgroup]]) {
// rows: k0_reduce, reduce, outer [6] x inner [40], one threadgroup per outer index
const int32_t o = int32_t(threadgroup_position_in_grid.x);
const uint lt_lid = thread_position_in_threadgroup.x;
const uint lt_lsize = threads_per_threadgroup.x;
const uint lt_lane = thread_index_in_simdgroup;
const uint lt_sg = simdgroup_index_in_threadgroup;
const uint lt_nsg = (lt_lsize + 31) / 32;
const int32_t o0 = o;
float acc4 = 0;
for (int32_t i = lt_lid; i < 40; i += lt_lsize) {
    const int32_t i0 = i;
    const float v1 = a0[o0 * 40 + i0];
    const float v2 = a1[o0 * 40 + i0];
    const float v3 = (v1 * v2);
    acc4 += v3;
}
acc4 = simd_sum(acc4);
threadgroup decltype(acc4) lt_sh_acc4[32];
if (lt_lane == 0) lt_sh_acc4[lt_sg] = acc4;
threadgroup_barrier(mem_flags::mem_threadgroup);
acc4 = lt_sh_acc4[0];
for (uint lt_s = 1; lt_s < lt_nsg; lt_s++) acc4 = (acc4 + lt_sh_acc4[lt_s]);
a2[o0] = acc4;

}
