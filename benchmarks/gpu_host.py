"""MLX's own cost per primitive on cuda: building (the Python call) and evaluating chains of N ops
(mx add, mx.compile, one lazytorch kernel through its executor and raw, small GEMMs).

    PYTHONPATH=$PWD python benchmarks/gpu_host.py      (MLX_USE_CUDA_GRAPHS=0 etc. to compare)
"""
import os, sys, time, statistics
import numpy as np, mlx.core as mx, lazytorch as lt
lt.set_backend("cuda")
tag = f"graphs={os.environ.get('MLX_USE_CUDA_GRAPHS','1')} ops={os.environ.get('MLX_MAX_OPS_PER_BUFFER','20')}"
N = 100
a = mx.zeros((1024,)); mx.eval(a)
def chain_add(x):
    for _ in range(N): x = x + 1.0
    return x
def build_eval(build):
    tb, te = [], []
    for i in range(35):
        t0 = time.perf_counter(); y = build(); t1 = time.perf_counter(); mx.eval(y); t2 = time.perf_counter()
        if i >= 5: tb.append(t1 - t0); te.append(t2 - t1)
    return statistics.median(tb) * 1e6 / N, statistics.median(te) * 1e6 / N
print(tag, "mx add chain   us/op build %.2f eval %.2f" % build_eval(lambda: chain_add(a)), flush=True)
cadd = mx.compile(chain_add)
print(tag, "mx.compile add chain us/op call %.2f eval %.2f" % build_eval(lambda: cadd(a)), flush=True)
# a lazytorch kernel (precompiled) called N times in a chain through its executor
f = lt.compile(lambda x: (x * 1.01 + 0.5).sin())
x = lt.tensor(np.ones(1024, np.float32)); f(x).numpy()
entry = list(f._entries.values())[0]; ex = entry.executable
buf = x.node.buffer
def chain_lt():
    b = buf
    (slot, _), = entry.arg_slots
    for _ in range(N):
        v = entry.template.copy(); v[slot] = b
        (b,) = ex.run(v)
    return b.array
print(tag, "lt kernel chain us/op build %.2f eval %.2f" % build_eval(chain_lt), flush=True)
# the raw precompiled kernel call, without the executor
fn = ex.steps[0][0]
class W: pass
from lazytorch.runtime.mlx import ScalarBuffer
ScalarBuf = lambda v: ScalarBuffer(v, lt.float32)
vals = [v for v in entry.template if v is not None]
print("kernel reads", [type(b).__name__ for _, b in ex.plan.launches[0].reads], "template", vals)
def chain_raw():
    r = W(); r.array = buf.array
    for _ in range(N):
        w = W(); w.array = mx.zeros((1024,)) if False else r.array
        fn([r] + [ScalarBuf(v) for v in vals], [w]); r = w
    return r.array
try:
    print(tag, "raw kernel chain us/op build %.2f eval %.2f" % build_eval(chain_raw), flush=True)
except Exception as e: print("raw failed", e)
# small GEMMs as in W9
A = mx.random.normal((55, 384)); B = mx.random.normal((384, 384)); mx.eval(A, B)
def chain_mm():
    y = A
    for _ in range(N): y = mx.matmul(y, B) * 0.05
    return y
print(tag, "mx matmul+scale chain us/pair build %.2f eval %.2f" % build_eval(chain_mm), flush=True)
cmm = mx.compile(chain_mm)
print(tag, "mx.compile matmul chain us/pair call %.2f eval %.2f" % build_eval(cmm), flush=True)
