
#include "mlx/backend/cuda/device/utils.cuh"

#include <cooperative_groups.h>

// lazytorch CUDA kernel header: the helpers CUDA's device math lacks (torch's division, NaN-propagating
// max/min, sigmoid) and warp shuffles of every register type.  Helpers are overloads, not per-type names.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#ifndef INFINITY
#define INFINITY __builtin_huge_valf()
#endif
#ifndef NAN
#define NAN __builtin_nanf("")
#endif
typedef unsigned int uint;
typedef unsigned short ushort;
// __shfl_down_sync over a full warp of 32 lanes for every register type (bool travels as int).
template <typename T> __device__ inline T lt_shuffle_down(T v, unsigned d) {
    return (T)__shfl_down_sync(0xffffffffu, v, d, 32);
}
__device__ inline bool lt_shuffle_down(bool v, unsigned d) {
    return __shfl_down_sync(0xffffffffu, (int)v, d, 32) != 0;
}
namespace mlx::core::cu {

namespace cg = cooperative_groups;

__global__ void custom_kernel_lt_c27cfb31d3ca(
    const float* a0,
    float* a1) {
// rows: k0_row, row, outer [6] x inner [40], one threadgroup per outer index
const int32_t o = int32_t(blockIdx.x);
const uint lt_lid = threadIdx.x;
const uint lt_lsize = blockDim.x;
const uint lt_lane = (threadIdx.x % 32);
const uint lt_sg = (threadIdx.x / 32);
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
for (ushort lt_d = 16; lt_d > 0; lt_d /= 2) { const auto lt_b = lt_shuffle_down(acc2, lt_d); acc2 = (lt_b > acc2 ? lt_b : acc2); }
__shared__ decltype(acc2) lt_sh_acc2[32];
if (lt_lane == 0) lt_sh_acc2[lt_sg] = acc2;
acc2_nan = __any_sync(0xffffffffu, acc2_nan);
__shared__ int lt_shn_acc2[32];
if (lt_lane == 0) lt_shn_acc2[lt_sg] = acc2_nan;
__syncthreads();
acc2 = lt_sh_acc2[0];
for (uint lt_s = 1; lt_s < lt_nsg; lt_s++) acc2 = (lt_sh_acc2[lt_s] > acc2 ? lt_sh_acc2[lt_s] : acc2);
for (uint lt_s = 0; lt_s < lt_nsg; lt_s++) acc2_nan |= lt_shn_acc2[lt_s];
if (acc2_nan) acc2 = NAN;
float acc6 = 0;
for (int32_t i = lt_lid; i < 40; i += lt_lsize) {
    const int32_t i0 = i;
    const float v3 = a0[o0 * 40 + i0];
    const float v4 = (v3 - acc2);
    const float v5 = expf(v4);
    acc6 += v5;
}
for (ushort lt_d = 16; lt_d > 0; lt_d /= 2) { const auto lt_b = lt_shuffle_down(acc6, lt_d); acc6 = (acc6 + lt_b); }
__shared__ decltype(acc6) lt_sh_acc6[32];
if (lt_lane == 0) lt_sh_acc6[lt_sg] = acc6;
__syncthreads();
acc6 = lt_sh_acc6[0];
for (uint lt_s = 1; lt_s < lt_nsg; lt_s++) acc6 = (acc6 + lt_sh_acc6[lt_s]);
for (int32_t i = lt_lid; i < 40; i += lt_lsize) {
    const int32_t i0 = i;
    const float v7 = a0[o0 * 40 + i0];
    const float v8 = (v7 - acc2);
    const float v9 = expf(v8);
    const float v10 = (v9 / acc6);
    a1[o0 * 40 + i0] = v10;
}

}

} // namespace mlx::core::cu
