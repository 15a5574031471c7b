"""Whole GPU calls of W1-W4, W7 (lazy and lt.compile), MLX's floor, and W9 beside torch eager, one
process; MLX_USE_CUDA_GRAPHS / MLX_MAX_OPS_PER_BUFFER (read once per process) label the rows.

    PYTHONPATH=$PWD python benchmarks/gpu_whole_calls.py [w9] [torch]
"""
import os, sys, time, statistics
import numpy as np, mlx.core as mx, lazytorch as lt
sys.path.insert(0, "."); sys.path.insert(0, "examples")
from benchmarks.workloads import w1_math, w7_math
lt.set_backend("cuda")
tag = f"graphs={os.environ.get('MLX_USE_CUDA_GRAPHS','1')} ops={os.environ.get('MLX_MAX_OPS_PER_BUFFER','-')}"

from benchmarks.timing import per_call_us
med = lambda fn, n=60: per_call_us(fn, n, warmup=8)

def sync(t):
    lt.eval(t); lt.cuda.synchronize()

class O:  # lazytorch ops table for the workload math
    gelu_tanh = staticmethod(lambda x: lt.nn.functional.gelu(x, approximate="tanh"))
    sigmoid = staticmethod(lt.sigmoid); tanh = staticmethod(lt.tanh)
    softmax = staticmethod(lambda x: lt.softmax(x, -1)); relu = staticmethod(lt.relu)
    layer_norm = staticmethod(lambda x, w, b: lt.nn.functional.layer_norm(x, (x.shape[-1],), w, b))
rng = np.random.default_rng(0)
R = lambda *s: lt.tensor(rng.standard_normal(s).astype(np.float32))
cases = {
    "W1": (lambda a, b, c: w1_math(O, a, b, c), [R(1 << 24), R(1 << 24), R(1 << 24)]),
    "W2": (lambda x, b, s: O.relu(x + b) * s, [R(4096, 4096), R(4096), R(4096)]),
    "W3": (O.softmax, [R(4096, 4096)]),
    "W4": (O.layer_norm, [R(8192, 1024), R(1024), R(1024)]),
    "W7": (lambda x: w7_math(O, x), [R(1024)]),
}
for name, (fn, args) in cases.items():
    for a in args: sync(a)
    cf = lt.compile(fn)
    lz = med(lambda: sync(fn(*args))); cp = med(lambda: sync(cf(*args)))
    print(f"{tag} {name} lazy {lz[0]:8.1f} ({lz[1]:7.1f})  compiled {cp[0]:8.1f} ({cp[1]:7.1f}) us", flush=True)
a7 = mx.zeros((1024,)); mx.eval(a7)
print(f"{tag} mx a+1 floor {med(lambda: mx.eval(a7 + 1.0))[0]:8.1f} us", flush=True)
cw = mx.compile(lambda a: ((a * 1.01 + 0.5) - 0.25) / 1.02)
print(f"{tag} mx.compile 4 ops {med(lambda: mx.eval(cw(a7)))[0]:8.1f} us", flush=True)
if "w9" in sys.argv:
    from benchmarks.workloads import minilm_inputs, minilm_run
    inputs = minilm_inputs(np.random.default_rng(0), {"sentences": 8})
    fwd = minilm_run("lazytorch"); args = [lt.tensor(a) for a in inputs]
    cf = lt.compile(fwd)
    lz = med(lambda: fwd(*args).numpy(), 20); cp = med(lambda: cf(*args).numpy(), 30)
    print(f"{tag} W9 lazy {lz[0]/1e3:8.2f} ms compiled {cp[0]/1e3:8.2f} ms (min {cp[1]/1e3:.2f})", flush=True)
    if "torch" in sys.argv:
        import torch
        tf = minilm_run("torch"); targs = [torch.from_numpy(a).cuda() for a in inputs]
        with torch.no_grad():
            tt = med(lambda: tf(*targs).cpu().numpy(), 30)
        print(f"torch W9 eager {tt[0]/1e3:8.2f} ms (min {tt[1]/1e3:.2f})", flush=True)
