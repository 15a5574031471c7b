
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

__global__ void custom_kernel_lt_d0ac62f39bc3(
    const float* a0,
    float* a1) {
// rows: k0_row, row, outer [6] x inner [40]; geometry threads=192 groups=1 rows=6 per_thread=4 vec=4
const int32_t o = int32_t(blockIdx.x) * 6 + int32_t((threadIdx.x / 32));
if (o >= 6) return;   // a whole simdgroup: no barrier follows
const uint lt_lid = (threadIdx.x % 32);
const uint lt_lsize = 32;
const bool lt_aligned = (size_t)(a0) % 16 == 0 && (size_t)(a1) % 16 == 0;
const int32_t o0 = o;
float lt_c0[4];   // this thread's elements of the row, read once
float lt_row0[4];   // costly values kept for a later pass
float acc2 = -INFINITY;
int acc2_nan = 0;
#pragma unroll
for (uint lt_k = 0; lt_k < 1; lt_k++) {
    const int32_t lt_b = int32_t((lt_lid + lt_k * 32) * 4);
    if (lt_b >= 40) break;   // rows are a multiple of 4 long: a step is whole
    alignas(16) float lt_l0[4]; if (lt_aligned) { *reinterpret_cast<uint4*>(lt_l0) = *reinterpret_cast<const uint4*>(a0 + o0 * 40 + lt_b); } else { for (int lt_e = 0; lt_e < 4; lt_e++) lt_l0[lt_e] = a0[o0 * 40 + lt_b + lt_e]; }
    #pragma unroll
    for (uint lt_q = 0; lt_q < 4; lt_q++) {
        const uint lt_j = lt_k * 4 + lt_q;
        const int32_t i = lt_b + int32_t(lt_q);
        const int32_t i0 = i;
        const float v1 = lt_l0[lt_q]; lt_c0[lt_j] = v1;
        acc2 = v1 > acc2 ? v1 : acc2;
        acc2_nan |= v1 != v1;
    }
}
for (ushort lt_d = 16; lt_d > 0; lt_d /= 2) { const auto lt_b = lt_shuffle_xor(acc2, lt_d); acc2 = (lt_b > acc2 ? lt_b : acc2); }
acc2_nan = __any_sync(0xffffffffu, acc2_nan);

if (acc2_nan) acc2 = NAN;
float acc6 = 0;
#pragma unroll
for (uint lt_k = 0; lt_k < 1; lt_k++) {
    const int32_t lt_b = int32_t((lt_lid + lt_k * 32) * 4);
    if (lt_b >= 40) break;   // rows are a multiple of 4 long: a step is whole
    #pragma unroll
    for (uint lt_q = 0; lt_q < 4; lt_q++) {
        const uint lt_j = lt_k * 4 + lt_q;
        const int32_t i = lt_b + int32_t(lt_q);
        const int32_t i0 = i;
        const float v3 = lt_c0[lt_j];
        const float v4 = (v3 - acc2);
        const float v5 = expf(v4);
        lt_row0[lt_j] = v5;
        acc6 += v5;
    }
}
for (ushort lt_d = 16; lt_d > 0; lt_d /= 2) { const auto lt_b = lt_shuffle_xor(acc6, lt_d); acc6 = (acc6 + lt_b); }

#pragma unroll
for (uint lt_k = 0; lt_k < 1; lt_k++) {
    const int32_t lt_b = int32_t((lt_lid + lt_k * 32) * 4);
    if (lt_b >= 40) break;   // rows are a multiple of 4 long: a step is whole
    alignas(16) float lt_s1[4];
    #pragma unroll
    for (uint lt_q = 0; lt_q < 4; lt_q++) {
        const uint lt_j = lt_k * 4 + lt_q;
        const int32_t i = lt_b + int32_t(lt_q);
        const int32_t i0 = i;
        const float v7 = lt_row0[lt_j];
        const float v8 = (v7 / acc6);
        lt_s1[lt_q] = v8;
    }
    if (lt_aligned) { *reinterpret_cast<uint4*>(a1 + o0 * 40 + lt_b) = *reinterpret_cast<const uint4*>(lt_s1); } else { for (int lt_e = 0; lt_e < 4; lt_e++) a1[o0 * 40 + lt_b + lt_e] = lt_s1[lt_e]; }
}

}

} // namespace mlx::core::cu
