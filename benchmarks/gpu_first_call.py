"""W9 (MiniLM) on cuda in a fresh process: import+load, first call, second call, 20 more; NVRTC stats.

    PYTHONPATH=$PWD python benchmarks/gpu_first_call.py
    (LAZYTORCH_CUDA_RUNTIME=driver|mlx; through MLX, LAZYTORCH_CUDA_JIT=ahead|mlx)
"""
import os, sys, time
t0 = time.perf_counter()
import numpy as np
import lazytorch as lt
from lazytorch.runtime import nvrtc
sys.path.insert(0, "benchmarks/.."); sys.path.insert(0, "examples")
from benchmarks.workloads import minilm_inputs, minilm_run
lt.set_backend("cuda")
inputs = minilm_inputs(np.random.default_rng(0), {"sentences": 8})
fwd = minilm_run("lazytorch")
args = [lt.tensor(a) for a in inputs]
t1 = time.perf_counter()
out = fwd(*args); r = out.numpy()
t2 = time.perf_counter()
out = fwd(*args); r2 = out.numpy()
t3 = time.perf_counter()
ts = []
for _ in range(20):
    a = time.perf_counter(); out = fwd(*args); out.numpy(); ts.append(time.perf_counter() - a)
backend = type(__import__('lazytorch.runtime', fromlist=['x']).get_backend('cuda')).__name__
print(f"{backend} jit={os.environ.get('LAZYTORCH_CUDA_JIT','ahead')} "
      f"import+load {t1-t0:.2f}s first {t2-t1:.2f}s second {(t3-t2)*1e3:.1f}ms steady {np.median(ts)*1e3:.2f}ms "
      f"nvrtc {nvrtc.stats} maxdiff {float(np.abs(r-r2).max())}", flush=True)
np.save(f"/tmp/w9_{backend}_{os.environ.get('LAZYTORCH_CUDA_JIT','ahead')}.npy", r)
