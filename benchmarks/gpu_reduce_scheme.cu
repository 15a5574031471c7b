// The grid-combine reduction scheme of lazytorch's GPU rows template (partials, a fence and an atomic
// ticket by thread 0, the last group folds), written by hand for 2^24 floats and timed with CUDA
// events over group counts and threads, without MLX: nvcc -O3 -arch=sm_90 gpu_reduce_scheme.cu && ./a.out
#include <cstdio>
#include <cuda_runtime.h>
template <int T>
__global__ void red(const float* __restrict__ a, float* out, float* part, int* done, int n, int per) {
    int g = blockIdx.x, G = gridDim.x;
    int lo = g * per, hi = min(lo + per, n);
    float acc = 0.f, acc1 = 0.f;
    int b = lo + threadIdx.x * 4;
    for (; b + 4 * T < hi; b += 8 * T) {
        float4 v = *reinterpret_cast<const float4*>(a + b);
        float4 w = *reinterpret_cast<const float4*>(a + b + 4 * T);
        acc += (v.x + v.y) + (v.z + v.w);
        acc1 += (w.x + w.y) + (w.z + w.w);
    }
    for (; b < hi; b += 4 * T) { float4 v = *reinterpret_cast<const float4*>(a + b); acc += (v.x + v.y) + (v.z + v.w); }
    acc += acc1;
    for (int d = 16; d > 0; d /= 2) acc += __shfl_down_sync(0xffffffffu, acc, d);
    __shared__ float sh[32];
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = acc;
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0) {
        float s = 0; for (int i = 0; i < T / 32; i++) s += sh[i];
        part[g] = s;
        __threadfence();
        last = atomicAdd(done, 1) == G - 1;
        if (last) __threadfence();
    }
    __syncthreads();
    if (!last) return;
    float s = 0;
    for (int p = threadIdx.x; p < G; p += T) s += ((volatile float*)part)[p];
    for (int d = 16; d > 0; d /= 2) s += __shfl_down_sync(0xffffffffu, s, d);
    __syncthreads();
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) { float t = 0; for (int i = 0; i < T / 32; i++) t += sh[i]; *out = t; *done = 0; }
}
template <int T> float run(const float* a, float* out, float* part, int* done, int n, int G) {
    int per = ((n / G + 4 * T - 1) / (4 * T)) * 4 * T;
    G = (n + per - 1) / per;
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int i = 0; i < 5; i++) red<T><<<G, T>>>(a, out, part, done, n, per);
    cudaEventRecord(e0);
    for (int i = 0; i < 100; i++) red<T><<<G, T>>>(a, out, part, done, n, per);
    cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    return ms * 10.f;   // us per launch
}
int main() {
    int n = 1 << 24;
    float *a, *out, *part; int* done;
    cudaMalloc(&a, n * 4); cudaMalloc(&out, 4); cudaMalloc(&part, 65536 * 4); cudaMalloc(&done, 4);
    cudaMemset(a, 0, n * 4); cudaMemset(done, 0, 4);
    float* h = new float[n]; for (int i = 0; i < n; i++) h[i] = 1.f; cudaMemcpy(a, h, n * 4, cudaMemcpyHostToDevice);
    // copy bandwidth reference
    float* c; cudaMalloc(&c, n * 4);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    cudaEventRecord(e0); for (int i = 0; i < 20; i++) cudaMemcpy(c, a, n * 4, cudaMemcpyDeviceToDevice); cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); printf("copy 64MB d2d %.1f us (read-only ideal ~%.1f us)\n", ms * 50, ms * 25);
    int Gs[] = {32, 66, 132, 264, 528, 1056, 2112, 4224};
    for (int G : Gs) {
        float t256 = run<256>(a, out, part, done, n, G), t512 = run<512>(a, out, part, done, n, G), t1024 = run<1024>(a, out, part, done, n, G);
        float r; cudaMemcpy(&r, out, 4, cudaMemcpyDeviceToHost);
        printf("groups %5d: T=256 %7.1f us  T=512 %7.1f us  T=1024 %7.1f us   (sum %.0f)\n", G, t256, t512, t1024, r);
    }
    return 0;
}
