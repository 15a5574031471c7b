"""Where a W9 call with lt.compile goes on cuda: launches by kind, host part vs the wait, a cProfile
of the host part, torch eager beside, and torch.profiler (CUPTI sees MLX's kernels too) for both:
kernels per call, kernel time, and a chrome trace in $OUT (or /tmp).

    PYTHONPATH=$PWD python benchmarks/gpu_w9_profile.py
"""
import os, sys, time, statistics, cProfile, pstats, io, collections
import numpy as np, mlx.core as mx, lazytorch as lt
sys.path.insert(0, "."); sys.path.insert(0, "examples")
from benchmarks.workloads import minilm_inputs, minilm_run
lt.set_backend("cuda")
inputs = minilm_inputs(np.random.default_rng(0), {"sentences": 8})
fwd = minilm_run("lazytorch"); args = [lt.tensor(a) for a in inputs]
for a in args: a.numpy()
cf = lt.compile(fwd)
out = cf(*args); out.numpy()
(entry,) = cf._entries.values()
plan = entry.plan
kinds = collections.Counter((l.kind, getattr(l, "pattern", "")) for l in plan.launches)
print("launches", len(plan.launches), dict(kinds))

from benchmarks.timing import per_call_us
med = lambda fn: tuple(t / 1e3 for t in per_call_us(fn))        # milliseconds
print("whole call ms", med(lambda: cf(*args).numpy()))
t = []
for _ in range(30):
    a = time.perf_counter(); o = cf(*args); b = time.perf_counter(); mx.eval(o.node.buffer.array); c = time.perf_counter()
    t.append((b - a, c - b))
print("host part ms %.2f, eval wait ms %.2f" % (statistics.median(x[0] for x in t) * 1e3, statistics.median(x[1] for x in t) * 1e3))
pr = cProfile.Profile(); pr.enable()
for _ in range(20): cf(*args).numpy()
pr.disable()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12); print(s.getvalue()[-4500:])
# GPU time of the same MLX graph without the host: build once per call is the cost; time mx ops alone
import torch
tf = minilm_run("torch"); targs = [torch.from_numpy(a).cuda() for a in inputs]
with torch.no_grad():
    print("torch eager ms", med(lambda: tf(*targs).cpu().numpy()))
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(5): tf(*targs).cpu()
    ev = p.key_averages()
    tot = sum(e.device_time_total for e in ev) / 5
    print("torch device time per call us", round(tot, 1), "kernels/call", sum(e.count for e in ev) / 5)
with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
    for _ in range(5): cf(*args).numpy()
ev = p.key_averages()
gpu = [e for e in ev if e.device_time_total > 0]
print("lazytorch device time per call us", round(sum(e.device_time_total for e in gpu) / 5, 1), "kernels/call", sum(e.count for e in gpu) / 5)
print(p.key_averages().table(sort_by="device_time_total", row_limit=25, max_name_column_width=60))
p.export_chrome_trace(os.environ.get("OUT", "/tmp") + "/w9_trace.json")
