
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

__global__ void custom_kernel_lt_7df007b0e666(
    const float* a0,
    const float* a1,
    float* a2) {
// rows: k0_reduce, reduce, outer [6] x inner [40], one threadgroup per outer index
const int32_t o = int32_t(blockIdx.x);
const uint lt_lid = threadIdx.x;
const uint lt_lsize = blockDim.x;
const uint lt_lane = (threadIdx.x % 32);
const uint lt_sg = (threadIdx.x / 32);
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
for (ushort lt_d = 16; lt_d > 0; lt_d /= 2) { const auto lt_b = lt_shuffle_down(acc4, lt_d); acc4 = (acc4 + lt_b); }
__shared__ decltype(acc4) lt_sh_acc4[32];
if (lt_lane == 0) lt_sh_acc4[lt_sg] = acc4;
__syncthreads();
acc4 = lt_sh_acc4[0];
for (uint lt_s = 1; lt_s < lt_nsg; lt_s++) acc4 = (acc4 + lt_sh_acc4[lt_s]);
a2[o0] = acc4;

}

} // namespace mlx::core::cu
