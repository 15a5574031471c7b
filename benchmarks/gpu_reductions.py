"""Whole-call timings of long reductions on cuda (R1-R4), torch beside; one process per geometry:

    LAZYTORCH_GPU_GEOMETRY=split=1 PYTHONPATH=$PWD python benchmarks/gpu_reductions.py
"""
import os, statistics, time, sys
import numpy as np, mlx.core as mx, lazytorch as lt, torch
lt.set_backend("cuda")
def sync(t):
    lt.eval(t); b = t.node.buffer; mx.eval(b.array)
from benchmarks.timing import per_call_us
med = lambda fn: per_call_us(fn, warmup=3)[0]
rng = np.random.default_rng(0)
cases = {"R1 sum 2^24": (rng.standard_normal(1 << 24).astype(np.float32), lambda m, x: x.sum()),
         "R2 sum(1) 4x2^22": (rng.standard_normal((4, 1 << 22)).astype(np.float32), lambda m, x: x.sum(dim=1)),
         "R3 sum(0) 2^20x16": (rng.standard_normal((1 << 20, 16)).astype(np.float32), lambda m, x: x.sum(dim=0)),
         "R4 argmax 2^24": (rng.standard_normal(1 << 24).astype(np.float32), lambda m, x: x.argmax())}
geo = os.environ.get("LAZYTORCH_GPU_GEOMETRY", "")
for name, (a, f) in cases.items():
    x = lt.tensor(a); sync(x * 1.0)
    t = torch.from_numpy(a).cuda()
    cf = lt.compile(lambda x, f=f: f(lt, x))
    lt_us = med(lambda: sync(f(lt, x)))
    cp_us = med(lambda: sync(cf(x)))
    m = mx.array(a)
    mx_us = med(lambda: mx.eval(m.sum() if "argmax" not in name else mx.argmax(m)))
    th_us = med(lambda: (f(torch, t), torch.cuda.synchronize()))
    ok = np.allclose(f(lt, x).numpy(), f(torch, t).cpu().numpy(), rtol=1e-3, atol=1e-2)
    print(f"geo={geo!r:12s} {name:20s} lazytorch {lt_us:8.1f} us  lt.compile {cp_us:8.1f} us  "
          f"mlx (R1/R4 op) {mx_us:8.1f} us  torch {th_us:8.1f} us   match {ok}", flush=True)
