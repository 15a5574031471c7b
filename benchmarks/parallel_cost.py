"""What a generated C kernel's OpenMP fork costs, and what an element of each op class costs:
the constants of codegen/targets/c.py's PARALLEL cost model (docs/benchmarks.md, "Parallel
kernels by work, not size").

    python -m benchmarks.parallel_cost                 # fork cost and every probe, 200 calls each
    python -m benchmarks.parallel_cost --calls 400 --gap-us 0 --probes exp,add

Each probe is a small lazytorch program; its kernel is lowered and rendered twice, once forking
(`parallel for`) and once serial, and both go into one library compiled with the cpu backend's
toolchain, next to a C timing loop.  The loop calls the two variants alternately (so a burst of
load on the shared machine hits both), each call timed alone, with `--gap-us` of busy waiting
after each: between the demo's kernels sit BLAS calls of 100+ us, so libgomp's workers (spin
count 1000, runtime/threads.py) are asleep when a kernel forks, and the fork pays their wake-up.
Reported per probe: median and min of each variant in us, the serial ns per element, and the
work units the cost model gives the kernel (codegen/cost.py).
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
from dataclasses import replace

import numpy as np

TIMER = r"""
#include <time.h>
static double lt_now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static void lt_spin_ns(double ns) { double end = lt_now_ns() + ns; while (lt_now_ns() < end) ; }
/* calls a and b alternately `reps` times, each timed alone, `gap_ns` of busy waiting after each */
void lt_time_pair(void (*a)(char **), void (*b)(char **), char **args, int reps, double gap_ns,
                  double *ta, double *tb) {
    for (int r = 0; r < reps; r++) {
        double t0 = lt_now_ns(); a(args); double t1 = lt_now_ns(); ta[r] = t1 - t0; lt_spin_ns(gap_ns);
        t0 = lt_now_ns(); b(args); t1 = lt_now_ns(); tb[r] = t1 - t0; lt_spin_ns(gap_ns);
    }
}
/* an OpenMP region with (next to) nothing to do: its time is the fork and join */
static volatile int lt_sink;
void lt_empty_parallel(char **args) {
    (void)args;
    #pragma omp parallel for schedule(static) if(lt_parallel)
    for (int i = 0; i < 2; i++) lt_sink = i;
}
void lt_empty_serial(char **args) { (void)args; for (int i = 0; i < 2; i++) lt_sink = i; }
"""

N = 131072          # the demo's softmax kernel's elements


lt = threads = None          # (imported in main: --torch-first imports torch before them)


def _x(*shape):
    return lt.rand(*shape) + 0.5           # positive: log, pow and sqrt stay finite


# name -> a program whose (last) kernel is the probe; sizes of 131072 elements
PROBES = {
    "copy": lambda: _x(512, 256).t().contiguous(),
    "add": lambda: _x(N) + _x(N),
    "x*2+1": lambda: _x(N) * 2.0 + 1.0,
    "mul x8": lambda: _x(N) * 1.1 * 1.2 * 1.3 * 1.4 * 1.5 * 1.6 * 1.7 * 1.8,
    "div": lambda: _x(N) / _x(N),
    "sqrt": lambda: lt.sqrt(_x(N)),
    "exp": lambda: lt.exp(_x(N)),
    "tanh": lambda: lt.tanh(_x(N)),
    "sigmoid": lambda: lt.sigmoid(_x(N)),
    "erf": lambda: lt.erf(_x(N)),
    "log": lambda: lt.log(_x(N)),
    "pow": lambda: lt.pow(_x(N), _x(N)),
    "sin": lambda: lt.sin(_x(N)),
    "exp f64": lambda: lt.exp(_x(N).double()),
    "sum rows": lambda: _x(512, 256).sum(-1),
    "amax rows": lambda: _x(512, 256).amax(-1),
    "softmax rows": lambda: lt.softmax(_x(2048, 64), dim=-1),
    "layer_norm rows": lambda: lt.nn.functional.layer_norm(_x(512, 256), (256,)),
    "gelu tanh": lambda: lt.nn.functional.gelu(_x(N), approximate="tanh"),
    "gelu erf": lambda: lt.nn.functional.gelu(_x(N)),
}


def _dialects():
    from lazytorch.codegen.targets import c
    rule = c.DIALECT.extra["parallel"]
    fork = replace(c.DIALECT, extra={**c.DIALECT.extra, "parallel": replace(rule, min_work=0.0)})
    serial = replace(c.DIALECT, extra={**c.DIALECT.extra, "parallel": replace(rule, min_work=float("inf"))})
    return fork, serial


def probe_library(launch, symbol: str):
    """(library, kernel) with the launch's kernel rendered forking (`<symbol>_p`) and serial
    (`<symbol>_s`), the timer beside them."""
    from lazytorch.codegen.lower import lower
    from lazytorch.codegen.render import render
    from lazytorch.runtime import compiler
    from lazytorch.runtime.cpu import Sources, program_source
    fork, serial = _dialects()
    kernel = lower(launch, symbol + "_p", row_cache=True)
    rp = render(kernel, fork)
    rs = render(lower(launch, symbol + "_s", row_cache=True), serial)
    src = Sources({symbol + "_p": rp.source, symbol + "_s": rs.source})
    src.helpers = rp.helpers | rs.helpers | {"lt_parallel"}
    lib = compiler.load(program_source(src) + TIMER)
    return lib, kernel


def arguments(launch) -> tuple[list, ctypes.Array]:
    """Buffers for a launch's reads and writes (uniform in [0.5, 1.5)) and its char** array."""
    rng = np.random.default_rng(0)
    arrays = []
    for _, ref in (*launch.reads, *launch.writes):
        arrays.append(np.array(rng.random(ref.shape) + 0.5, dtype=ref.dtype.np))
    err = np.zeros(1, np.int32)
    ptrs = (ctypes.c_void_p * (len(arrays) + 1))(*[a.ctypes.data for a in arrays], err.ctypes.data)
    return arrays + [err], ptrs


def time_pair(lib, a: str, b: str, args, reps: int, gap_us: float) -> tuple[list[float], list[float]]:
    ta, tb = (ctypes.c_double * reps)(), (ctypes.c_double * reps)()
    fn = lib.lt_time_pair
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_double,
                   ctypes.c_void_p, ctypes.c_void_p)
    addr = lambda name: ctypes.cast(lib[name], ctypes.c_void_p)
    fn(addr(a), addr(b), args, reps, gap_us * 1e3, ta, tb)
    return [t / 1e3 for t in ta], [t / 1e3 for t in tb]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--gap-us", type=float, default=200.0, help="busy waiting after each call (us)")
    ap.add_argument("--probes", default="", help="comma-separated probe names (default: all)")
    ap.add_argument("--torch-first", action="store_true",
                    help="import torch first (as the benchmark harness): its libgomp, default spin")
    args = ap.parse_args(argv)
    if args.torch_first:
        import torch  # noqa: F401
    global lt, threads
    import lazytorch as lt
    from lazytorch.runtime import threads
    threads.prepare_openmp()                # libgomp with the runtime's spin count, before any kernel loads
    from lazytorch.codegen.cost import kernel_work
    from lazytorch.codegen.targets import c
    from lazytorch.realize import kernel_plan
    rule = c.DIALECT.extra["parallel"]
    print(f"threads {threads.num_threads()}, openmp policy {threads.info()['openmp']}, "
          f"gap {args.gap_us:g} us, {args.calls} calls each (alternating)")
    lib, _ = probe_library(kernel_plan((lt.exp(_x(64)),), "cpu").launches[-1], "lt_warm")
    ser, par = time_pair(lib, "lt_empty_serial", "lt_empty_parallel", None, args.calls, args.gap_us)
    print(f"empty region: forked median {statistics.median(par):.1f} us, min {min(par):.1f} us "
          f"(serial loop {statistics.median(ser):.2f} us)")
    names = [p for p in args.probes.split(",") if p] or list(PROBES)
    print(f"{'probe':16} {'elements':>9} {'serial med/min us':>18} {'forked med/min us':>18} "
          f"{'ns/elem':>8} {'work':>9} {'ns/unit':>8} {'rule':>6}")
    for name in names:
        plan = kernel_plan((PROBES[name](),), "cpu")
        launch = [ln for ln in plan.launches if ln.kind == "kernel"][-1]
        lib, kernel = probe_library(launch, "lt_probe")
        keep, ptrs = arguments(launch)
        ser, par = time_pair(lib, "lt_probe_s", "lt_probe_p", ptrs, args.calls, args.gap_us)
        work = kernel_work(kernel, rule)
        med = statistics.median(ser)
        print(f"{name:16} {kernel.numel:9d} {med:8.1f} /{min(ser):8.1f} {statistics.median(par):8.1f} /"
              f"{min(par):8.1f} {med * 1e3 / kernel.numel:8.3f} {work:9.0f} {med * 1e3 / work:8.3f} "
              f"{'fork' if work >= rule.min_work else 'serial':>6}")


if __name__ == "__main__":
    main()
