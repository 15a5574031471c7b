"""Host time of one cuBLAS GEMM call as the driver runtime makes it, against variants: with a
workspace set on the handle (as torch sets one), cublasGemmEx, cublasSgemm, cublasLt with its
algorithm chosen once; torch.mm's host time beside.  Each figure: median µs per call of 200
calls queued without a sync (then one sync), over W5's first product (512×1024 @ 1024×4096).

    PYTHONPATH=$PWD python benchmarks/gpu_gemm_host.py
"""
import ctypes
import time
from ctypes import byref, c_float, c_int, c_longlong, c_uint64, c_void_p

import numpy as np

import lazytorch as lt
from lazytorch.runtime import cuda_driver as cd
from lazytorch.ir import dtypes as D

lt.set_backend("cuda")
dev = cd.device()
blas = dev.blas_raw
M, K, N = 512, 1024, 4096
a = cd.DeviceBuffer((M, K), D.float32)
b = cd.DeviceBuffer((K, N), D.float32)
c = cd.DeviceBuffer((M, N), D.float32)
one, zero = c_float(1.0), c_float(0.0)


def per_call(fn, n=200, rounds=7):
    out = []
    for _ in range(rounds):
        dev.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t0) / n * 1e6)
        dev.synchronize()
    return "median %.2f us  min %.2f" % (np.median(out), min(out))


def strided():
    r = blas.cublasGemmStridedBatchedEx(dev.blas_handle, c_int(0), c_int(0), c_int(N), c_int(M), c_int(K), byref(one),
                                         c_uint64(b.ptr), c_int(0), c_int(N), c_longlong(0), c_uint64(a.ptr), c_int(0),
                                         c_int(K), c_longlong(0), byref(zero), c_uint64(c.ptr), c_int(0), c_int(N),
                                         c_longlong(M * N), c_int(1), c_int(68), c_int(-1))
    assert r == 0, r


def gemm_ex():
    r = blas.cublasGemmEx(dev.blas_handle, c_int(0), c_int(0), c_int(N), c_int(M), c_int(K), byref(one),
                          c_uint64(b.ptr), c_int(0), c_int(N), c_uint64(a.ptr), c_int(0), c_int(K), byref(zero),
                          c_uint64(c.ptr), c_int(0), c_int(N), c_int(68), c_int(-1))
    assert r == 0, r


def sgemm():
    r = blas.cublasSgemm_v2(dev.blas_handle, c_int(0), c_int(0), c_int(N), c_int(M), c_int(K), byref(one),
                            c_uint64(b.ptr), c_int(N), c_uint64(a.ptr), c_int(K), byref(zero), c_uint64(c.ptr), c_int(N))
    assert r == 0, r


# the same call with its arguments made once (as the runtime's launch does)
pre = (dev.blas_handle, c_int(0), c_int(0), c_int(N), c_int(M), c_int(K), byref(one),
       c_uint64(b.ptr), c_int(0), c_int(N), c_longlong(0), c_uint64(a.ptr), c_int(0),
       c_int(K), c_longlong(0), byref(zero), c_uint64(c.ptr), c_int(0), c_int(N),
       c_longlong(M * N), c_int(1), c_int(68), c_int(-1))
fn = blas.cublasGemmStridedBatchedEx
print("noop ctypes call (cuCtxGetCurrent)", per_call(lambda: dev.raw.cuCtxGetCurrent(byref(c_void_p()))))
print("StridedBatchedEx, args premade  ", per_call(lambda: fn(*pre)))
print("StridedBatchedEx                ", per_call(strided))
print("GemmEx                          ", per_call(gemm_ex))
print("Sgemm                           ", per_call(sgemm))
for mode in (0, 1):
    r = blas.cublasSetMathMode(dev.blas_handle, c_int(mode))
    print("math mode", mode, "set", r, " StridedBatchedEx", per_call(lambda: fn(*pre)))
ws = cd.DeviceBuffer((32 << 20,), D.uint8)
r = blas.cublasSetWorkspace_v2(dev.blas_handle, c_uint64(ws.ptr), ctypes.c_size_t(32 << 20))
print("workspace set", r)
print("StridedBatchedEx + workspace    ", per_call(lambda: fn(*pre)))
print("GemmEx + workspace              ", per_call(gemm_ex))
print("Sgemm + workspace               ", per_call(sgemm))

import torch   # noqa: E402
ta, tb = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
tc = torch.empty(M, N, device="cuda")


def tmm():
    torch.mm(ta, tb, out=tc)


def t_sync():
    torch.cuda.synchronize()


out = []
for _ in range(7):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        tmm()
    out.append((time.perf_counter() - t0) / 200 * 1e6)
    torch.cuda.synchronize()
print("torch.mm(out=) host             median %.2f us  min %.2f" % (np.median(out), min(out)))
print("torch matmul backend pref", torch.backends.cuda.preferred_blas_library())
