
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
__device__ inline float lt_sigmoid(float x) { return (float)1 / ((float)1 + expf(-x)); }
__device__ inline float lt_reciprocal(float x) { return (float)1 / x; }
__device__ inline float lt_max(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ inline float lt_min(float a, float b) { return (a < b || a != a) ? a : b; }
__device__ inline float lt_rem(float a, float b) {
    float m = fmodf(a, b);
    return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
__device__ inline float lt_floordiv(float a, float b) {
    if (b == 0) return a / b;
    float m = fmodf(a, b);
    float d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
    if (d == 0) return copysignf((float)0, a / b);
    float f = floorf(d);
    return d - f > (float)0.5 ? f + 1 : f;
}
__device__ inline double lt_sigmoid(double x) { return (double)1 / ((double)1 + exp(-x)); }
__device__ inline double lt_reciprocal(double x) { return (double)1 / x; }
__device__ inline double lt_max(double a, double b) { return (a > b || a != a) ? a : b; }
__device__ inline double lt_min(double a, double b) { return (a < b || a != a) ? a : b; }
__device__ inline double lt_rem(double a, double b) {
    double m = fmod(a, b);
    return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
__device__ inline double lt_floordiv(double a, double b) {
    if (b == 0) return a / b;
    double m = fmod(a, b);
    double d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
    if (d == 0) return copysign((double)0, a / b);
    double f = floor(d);
    return d - f > (double)0.5 ? f + 1 : f;
}
// Integer division: division by zero sets *err (the backend raises ZeroDivisionError); MIN / -1 wraps
// as in torch.  T is any integer register type.
template <typename T> __device__ inline T lt_idiv(T a, T b, int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (T)-1) ? (T)(0ull - (unsigned long long)a) : (T)(a / b);
}
template <typename T> __device__ inline T lt_irem(T a, T b, int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    T r = (b < 0 && b == (T)-1) ? (T)0 : (T)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
template <typename T> __device__ inline T lt_ifloordiv(T a, T b, int32_t* err) {
    T q = lt_idiv(a, b, err);
    return (b != 0 && b != (T)-1 && a % b != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <typename T> __device__ inline T lt_ifmod(T a, T b, int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (T)-1) ? (T)0 : (T)(a % b);
}
template <typename T> __device__ inline T lt_ipow(T a, T b) {
    if (b < 0) return a == 1 ? (T)1 : (a == (T)-1 ? ((b & 1) ? (T)-1 : (T)1) : (T)0);
    unsigned long long r = 1, x = (unsigned long long)a;
    for (unsigned long long e = (unsigned long long)b; e; e >>= 1) { if (e & 1) r *= x; x *= x; }
    return (T)r;
}
// __shfl_down_sync over a full warp of 32 lanes for every register type (bool travels as int).
template <typename T> __device__ inline T lt_shuffle_down(T v, unsigned d) {
    return (T)__shfl_down_sync(0xffffffffu, v, d, 32);
}
__device__ inline bool lt_shuffle_down(bool v, unsigned d) {
    return __shfl_down_sync(0xffffffffu, (int)v, d, 32) != 0;
}
namespace mlx::core::cu {

namespace cg = cooperative_groups;

__global__ void custom_kernel_lt_d06b6afdf77a(
    const float* a0,
    const float* a1,
    const float* a2,
    float* a3) {
// linear: k0_pointwise, pointwise over 240 contiguous elements, one thread each
const int32_t i = int32_t(blockIdx.x * (size_t)blockDim.x + threadIdx.x);
if (i >= 240) return;
const float v2 = a0[0];
const float v3 = ((float)(v2));
const float v6 = a2[0];
const float v7 = ((float)(v6));
const float v1 = a1[i];
const float v4 = (v1 * v3);
const float v5 = expf(v4);
const float v8 = (v5 + v7);
const float v9 = lt_sigmoid(v8);
a3[i] = v9;

}

} // namespace mlx::core::cu
