// simd_shuffle_down for every register type: 64-bit values move as two 32-bit halves.
template <typename T> inline T lt_shuffle_down(T v, ushort d) { return metal::simd_shuffle_down(v, d); }
inline bool lt_shuffle_down(bool v, ushort d) { return metal::simd_shuffle_down(uint(v), d) != 0; }
inline int64_t lt_shuffle_down(int64_t v, ushort d) {
    uint2 h = as_type<uint2>(v);
    return as_type<int64_t>(uint2(metal::simd_shuffle_down(h.x, d), metal::simd_shuffle_down(h.y, d)));
}
[[kernel]] void custom_kernel_lt_6acad74fe6cb_float_float(
  const device float* a0 [[buffer(0)]],
  device float* a1 [[buffer(1)]],
  uint simdgroup_index_in_threadgroup [[simdgroup_index_in_threadgroup]],
  uint thread_index_in_simdgroup [[thread_index_in_simdgroup]],
  uint3 thread_position_in_threadgroup [[thread_position_in_threadgroup]],
  uint3 threadgroup_position_in_grid [[threadgroup_position_in_grid]],
  uint3 threads_per_threadgroup [[threads_per_threadgroup]]) {
// rows: k0_row, row, outer [6] x inner [40], one threadgroup per outer index
const int32_t o = int32_t(threadgroup_position_in_grid.x);
const uint lt_lid = thread_position_in_threadgroup.x;
const uint lt_lsize = threads_per_threadgroup.x;
const uint lt_lane = thread_index_in_simdgroup;
const uint lt_sg = simdgroup_index_in_threadgroup;
const uint lt_nsg = (lt_lsize + 31) / 32;
const int32_t o0 = o;
float acc2 = -INFINITY;
int acc2_nan = 0;
for (int32_t i = lt_lid; i < 40; i += lt_lsize) {
    const int32_t i0 = i;
    const float v1 = a0[o0 * 40 + i0];
    acc2 = v1 > acc2 ? v1 : acc2;
    acc2_nan |= v1 != v1;
}
acc2 = simd_max(acc2);
threadgroup decltype(acc2) lt_sh_acc2[32];
if (lt_lane == 0) lt_sh_acc2[lt_sg] = acc2;
acc2_nan = simd_max(acc2_nan);
threadgroup int lt_shn_acc2[32];
if (lt_lane == 0) lt_shn_acc2[lt_sg] = acc2_nan;
threadgroup_barrier(mem_flags::mem_threadgroup);
acc2 = lt_sh_acc2[0];
for (uint lt_s = 1; lt_s < lt_nsg; lt_s++) acc2 = (lt_sh_acc2[lt_s] > acc2 ? lt_sh_acc2[lt_s] : acc2);
for (uint lt_s = 0; lt_s < lt_nsg; lt_s++) acc2_nan |= lt_shn_acc2[lt_s];
if (acc2_nan) acc2 = NAN;
float acc6 = 0;
for (int32_t i = lt_lid; i < 40; i += lt_lsize) {
    const int32_t i0 = i;
    const float v3 = a0[o0 * 40 + i0];
    const float v4 = (v3 - acc2);
    const float v5 = metal::precise::exp(v4);
    acc6 += v5;
}
acc6 = simd_sum(acc6);
threadgroup decltype(acc6) lt_sh_acc6[32];
if (lt_lane == 0) lt_sh_acc6[lt_sg] = acc6;
threadgroup_barrier(mem_flags::mem_threadgroup);
acc6 = lt_sh_acc6[0];
for (uint lt_s = 1; lt_s < lt_nsg; lt_s++) acc6 = (acc6 + lt_sh_acc6[lt_s]);
for (int32_t i = lt_lid; i < 40; i += lt_lsize) {
    const int32_t i0 = i;
    const float v7 = a0[o0 * 40 + i0];
    const float v8 = (v7 - acc2);
    const float v9 = metal::precise::exp(v8);
    const float v10 = (v9 / acc6);
    a1[o0 * 40 + i0] = v10;
}

}
