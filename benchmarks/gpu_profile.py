"""Where a GPU call's time goes: W3 softmax 4096^2 and W7 lazy and with lt.compile, MLX's floor,
one generated kernel per mx.eval, torch beside; cProfile of W7 compiled.

    PYTHONPATH=$PWD python benchmarks/gpu_profile.py
"""
import cProfile, pstats, statistics, time, io
import numpy as np, mlx.core as mx, lazytorch as lt
lt.set_backend("cuda")

def sync(t):
    lt.eval(t); b = t.node.buffer; mx.eval(b.array) if hasattr(b, 'array') else None

from benchmarks.timing import per_call_us
med = lambda fn: per_call_us(fn, n=50)

def w7(x):
    for _ in range(5):
        x = ((x * 1.01 + 0.5) - 0.25) / 1.02
    return x

x3 = lt.tensor(np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)); sync(x3)
x7 = lt.tensor(np.random.default_rng(0).standard_normal(1024).astype(np.float32)); sync(x7)
soft = lambda x: lt.softmax(x, -1)
cases = {"W3 lazy": lambda: sync(soft(x3)), "W3 compiled": (lambda cf: lambda: sync(cf(x3)))(lt.compile(soft)),
         "W7 lazy": lambda: sync(w7(x7)), "W7 compiled": (lambda cf: lambda: sync(cf(x7)))(lt.compile(w7))}
a3 = mx.array(np.asarray(x3.numpy()))
mxsoft = lambda: mx.eval(mx.softmax(a3, axis=-1))
cases["mx softmax"] = mxsoft
cases["mx.eval(empty)"] = lambda: mx.eval(a3)
a7 = mx.zeros((1024,))
cases["mx a+1 (floor)"] = lambda: mx.eval(a7 + 1.0)
w7mx = lambda a: ((((a * 1.01 + 0.5) - 0.25) / 1.02))
cases["mx w7 (5x4 ops)"] = lambda: mx.eval(w7mx(w7mx(w7mx(w7mx(w7mx(a7))))))
cw = mx.compile(lambda a: w7mx(w7mx(w7mx(w7mx(w7mx(a))))))
cases["mx.compile w7"] = lambda: mx.eval(cw(a7))
for name, fn in cases.items():
    print(f"{name:16s} median {med(fn)[0]:8.1f} us  min {med(fn)[1]:8.1f} us", flush=True)
for name in ("W7 compiled",):
    pr = cProfile.Profile(); fn = cases[name]
    pr.enable()
    for _ in range(300): fn()
    pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18); print(name, s.getvalue()[-3500:])
# one generated softmax kernel per mx.eval, straight through MLX (no lazytorch host path)
from lazytorch.codegen.gpu import launch_call
from lazytorch.realize import kernel_plan
from lazytorch.runtime.mlx import CUDA, call_arguments, kernel_arguments
(launch,) = [l for l in kernel_plan([soft(x3)]).launches if l.kind == "kernel"]
call = launch_call(launch, "cuda")
k = mx.fast.cuda_kernel(**kernel_arguments(call, CUDA))
args = call_arguments(call, [a3.reshape(-1)])
print(f"{'W3 kernel alone':16s} median {med(lambda: mx.eval(k(**args)[0]))[0]:8.1f} us  (one launch per mx.eval)", flush=True)
import torch
t3 = torch.from_numpy(np.asarray(x3.numpy())).cuda()
print(f"{'torch softmax':16s} median {med(lambda: (torch.softmax(t3, -1), torch.cuda.synchronize()))[0]:8.1f} us", flush=True)
