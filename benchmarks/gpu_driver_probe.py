"""The driver runtime's host costs on a GPU host: stream sync, allocation, one launch, W7 with lt.compile
(whole and host part, cProfile), W5/W6 with lt.compile split into host part and whole, torch beside,
and the kernels each ran (CUPTI).

    PYTHONPATH=$PWD python benchmarks/gpu_driver_probe.py
"""
import cProfile
import ctypes
import pstats
import sys
import time

import numpy as np
import lazytorch as lt
sys.path.insert(0, ".")
lt.set_backend("cuda")
from lazytorch.runtime import cuda_driver as cd
from lazytorch.ir import dtypes as D
from benchmarks.workloads import BY_NAME, w7_math
from benchmarks.frameworks import _lazytorch_ops
dev = cd.device()
def tm(fn, n=2000):
    for _ in range(50): fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return "median %.2f us min %.2f" % (np.median(ts) * 1e6, min(ts) * 1e6)
print("sync idle", tm(dev.synchronize))
def af():
    p = ctypes.c_uint64(); dev.cu.cuMemAllocAsync(ctypes.byref(p), 4096, dev.stream); dev.cu.cuMemFreeAsync(p.value, dev.stream)
print("driver alloc+free", tm(af))
print("cached alloc+free", tm(lambda: cd.DeviceBuffer((1024,), D.float32)))
buf = cd.DeviceBuffer((1,), D.float32)
w = cd._walk((1,), ((1,), 0), ((1,), 0))
print("launch tiny", tm(lambda: cd._launch_walk("lt_copy4", buf.ptr, buf.ptr, w)))
def ls():
    cd._launch_walk("lt_copy4", buf.ptr, buf.ptr, w); dev.synchronize()
print("launch+sync", tm(ls))
o = _lazytorch_ops()
x = lt.tensor(np.random.default_rng(0).standard_normal(1024).astype(np.float32)); lt.eval(x)
cf = lt.compile(lambda x: w7_math(o, x))
def w7():
    y = cf(x); lt.eval(y); lt.cuda.synchronize()
print("W7 compiled whole", tm(w7))
def w7h():
    y = cf(x); lt.eval(y)
print("W7 compiled host only (no sync)", tm(w7h)); dev.synchronize()
cProfile.run("for _ in range(3000): w7()", "/tmp/p7.out")
pstats.Stats("/tmp/p7.out").sort_stats("tottime").print_stats(14)
rng = np.random.default_rng(0)
import torch
for wl in ("W5", "W6"):
    wk = BY_NAME[wl]
    arrs = wk.inputs(rng, wk.sizes)
    ins = [lt.tensor(a) for a in arrs]
    for a in ins: lt.eval(a)
    f = lt.compile(lambda *a: wk.math(o, *a))
    def whole():
        y = f(*ins); lt.eval(y); lt.cuda.synchronize()
    host = []
    def split():
        t0 = time.perf_counter(); y = f(*ins); lt.eval(y); host.append(time.perf_counter() - t0); lt.cuda.synchronize()
    print(wl, "whole", tm(whole, 300), flush=True)
    print(wl, "split", tm(split, 300), "host part median %.1f us" % (np.median(host) * 1e6))
    tins = [torch.from_numpy(a).cuda() for a in arrs]
    from benchmarks.frameworks import _torch_ops
    to = _torch_ops()
    def tw():
        y = wk.math(to, *tins); torch.cuda.synchronize()
    print(wl, "torch whole", tm(tw, 300))
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5): whole()
    evs = [e for e in prof.events() if e.device_type.name == "CUDA"]
    names = {}
    for e in evs: names[e.name[:60]] = names.get(e.name[:60], 0) + 1
    print(wl, "lt kernels per 5 calls:", names)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5): tw()
    names = {}
    for e in [e for e in prof.events() if e.device_type.name == "CUDA"]: names[e.name[:60]] = names.get(e.name[:60], 0) + 1
    print(wl, "torch kernels per 5 calls:", names)
