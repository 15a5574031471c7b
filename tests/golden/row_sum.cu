
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
// __shfl_xor_sync: a butterfly step, after which every lane of the warp holds the combined value.
template <typename T> __device__ inline T lt_shuffle_xor(T v, unsigned m) {
    return (T)__shfl_xor_sync(0xffffffffu, v, m, 32);
}
__device__ inline bool lt_shuffle_xor(bool v, unsigned m) {
    return __shfl_xor_sync(0xffffffffu, (int)v, m, 32) != 0;
}
namespace mlx::core::cu {

namespace cg = cooperative_groups;

__global__ void custom_kernel_lt_d1f621535eb9(
    const float* a0,
    const float* a1,
    float* a2) {
// rows: k0_reduce, reduce, outer [6] x inner [40]; geometry threads=192 groups=1 rows=6 per_thread=0 vec=4
const int32_t o = int32_t(blockIdx.x) * 6 + int32_t((threadIdx.x / 32));
if (o >= 6) return;   // a whole simdgroup: no barrier follows
const uint lt_lid = (threadIdx.x % 32);
const uint lt_lsize = 32;
const bool lt_aligned = (size_t)(a0) % 16 == 0 && (size_t)(a1) % 16 == 0;
const int32_t o0 = o;
float acc4 = 0;
#pragma unroll 4
for (int32_t lt_b = int32_t(lt_lid * 4); lt_b < 40; lt_b += 128) {
    alignas(16) float lt_l0[4]; if (lt_aligned) { *reinterpret_cast<uint4*>(lt_l0) = *reinterpret_cast<const uint4*>(a0 + o0 * 40 + lt_b); } else { for (int lt_e = 0; lt_e < 4; lt_e++) lt_l0[lt_e] = a0[o0 * 40 + lt_b + lt_e]; }
    alignas(16) float lt_l1[4]; if (lt_aligned) { *reinterpret_cast<uint4*>(lt_l1) = *reinterpret_cast<const uint4*>(a1 + o0 * 40 + lt_b); } else { for (int lt_e = 0; lt_e < 4; lt_e++) lt_l1[lt_e] = a1[o0 * 40 + lt_b + lt_e]; }
    #pragma unroll
    for (uint lt_q = 0; lt_q < 4; lt_q++) {
        const int32_t i = lt_b + int32_t(lt_q);
        const int32_t i0 = i;
        const float v1 = lt_l0[lt_q];
        const float v2 = lt_l1[lt_q];
        const float v3 = (v1 * v2);
        acc4 += v3;
    }
}
for (ushort lt_d = 16; lt_d > 0; lt_d /= 2) { const auto lt_b = lt_shuffle_xor(acc4, lt_d); acc4 = (acc4 + lt_b); }

a2[o0] = acc4;

}

} // namespace mlx::core::cu
