"""Stress generators: the program shapes a new user's trial broke and the op-by-op fuzzer never made.

Each generator draws, from a seed, a program written once against a module `m` (lazytorch or
torch) and run on both; the results must agree:
  - many_inputs: 30-80 tensors and Python scalars feeding one reduction or row program (the
    buffer cap of a launch);
  - long_chain: hundreds of pointwise steps with scalars, optionally reduced (compile time, caps);
  - creation: every creation function with every dtype (float ramps on Metal);
  - loop: a loop that evaluates some values each step while others stay pending (live tensors are
    synced, histories are cut);
  - numpy_mutation: host arrays brought in by tensor/from_numpy/as_tensor, then written to before
    (or after part of) the evaluation;
  - numpy_writes: writes through `x.numpy()` (memory shared with the evaluated tensor, as torch's)
    interleaved with lazy ops, in-place ops and partial evaluations, across dtypes and shapes
    (0-d, size-1, empty);
  - backward, module (stress_nn.py): random differentiable programs with their gradients, and
    small nn modules forward, backward and through optimizer steps.
Every program is run a second time with other Python scalars and other data of the same structure:
a graph-cache hit must give torch's values for the new scalars (scalars a pass inspects must be
structural), and compile nothing.

`python -m tests.fuzz.stress --programs 2000 --backends reference,cpu,metal-emu [--jobs N]` runs a
campaign; tests/test_fuzz_stress.py runs a few of each in the suite.
"""
from __future__ import annotations

import argparse
import gc
import math
import random
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

import lazytorch as lt

from .case import Case, normal_data, other_data, other_scalars
from .run import tee_log
from .stress_nn import GENERATORS as NN_GENERATORS

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
POINTWISE = [lambda m, y, s: y * s + 0.001, lambda m, y, s: y - s, lambda m, y, s: m.tanh(y) + s,
             lambda m, y, s: y * 0.5 + m.sigmoid(y) * s, lambda m, y, s: m.maximum(y, y * s),
             lambda m, y, s: (y + s).abs(), lambda m, y, s: m.where(y > s, y, y * 0.25)]
FINISH = [lambda m, y: y, lambda m, y: y.sum(), lambda m, y: y.mean(-1), lambda m, y: m.softmax(y, -1),
          lambda m, y: m.nn.functional.layer_norm(y, (y.shape[-1],)), lambda m, y: m.logsumexp(y, -1),
          lambda m, y: y.amax(-1, keepdim=True) - y, lambda m, y: y / y.sum(-1, keepdim=True).abs().clamp_min(1)]


def many_inputs(rng: random.Random) -> Case:
    """30-80 inputs into one reduction or row program: full-shape tensors, broadcast rows and
    columns, 0-d tensors, each scaled by its own Python scalar; sometimes a tensor is combined
    by a product, maximum or where instead of a sum, so more than adds reach the launch."""
    n = rng.randint(30, 80)
    shape = (rng.choice([1, 3, 4]), rng.choice([5, 16, 33]))
    finish = rng.choice(FINISH)
    scalars = [round(rng.uniform(-1, 1), 3) for _ in range(n)]
    shapes = [shape] + [rng.choice([shape, shape, (shape[1],), (shape[0], 1), ()]) for _ in range(n - 1)]
    combine = [rng.choice(["add", "add", "add", "mul", "max", "where"]) for _ in range(n)]
    g = np.random.default_rng(rng.randrange(1 << 30))
    data = [g.standard_normal(sh).astype(np.float32) for sh in shapes]

    def run(m, s, d):
        ts = [m.tensor(x) for x in d]
        acc = ts[0] * s[0]
        for t, c, how in zip(ts[1:], s[1:], combine[1:]):
            term = t * c
            acc = {"add": lambda: acc + term, "mul": lambda: acc * (1 + 0.1 * term),
                   "max": lambda: m.maximum(acc, term), "where": lambda: m.where(term > 0, acc, acc + term)}[how]()
        return [finish(m, acc)]
    return Case("many_inputs", run, scalars, data, rtol=1e-3, atol=1e-4)


def long_chain(rng: random.Random) -> Case:
    steps = rng.randint(100, 400)
    ops = [rng.choice(POINTWISE) for _ in range(steps)]
    finish = rng.choice(FINISH)
    scalars = [round(rng.uniform(0.5, 1.0), 3) for _ in range(steps)]

    def run(m, s, d):
        y = m.tensor(d[0])
        for op, c in zip(ops, s):
            y = op(m, y, c)
        return [finish(m, y)]
    return Case("long_chain", run, scalars, normal_data(rng, (2, 8), 1), rtol=2e-3, atol=2e-4)


CREATION = {
    "zeros": lambda m, dt: m.zeros(2, 3, dtype=dt), "ones": lambda m, dt: m.ones(5, dtype=dt),
    "full": lambda m, dt: m.full((2, 2), 3, dtype=dt), "arange": lambda m, dt: m.arange(2, 11, 3, dtype=dt),
    "arange_f": lambda m, dt: m.arange(-1.0, 1.5, 0.25, dtype=dt),
    "linspace": lambda m, dt: m.linspace(-2, 5, steps=7, dtype=dt), "eye": lambda m, dt: m.eye(3, 4, dtype=dt),
    "full_like": lambda m, dt: m.full_like(m.ones(3), 2, dtype=dt),
    "zeros_like": lambda m, dt: m.zeros_like(m.ones(2, 3), dtype=dt),
    "ones_like": lambda m, dt: m.ones_like(m.zeros(4, 1), dtype=dt),
    "empty_shape": lambda m, dt: m.empty(3, 0, dtype=dt),          # size 0: nothing to compare but shape
    "arange_neg": lambda m, dt: m.arange(9, -3, -2, dtype=dt),
    "arange_end": lambda m, dt: m.arange(6, dtype=dt),
    "linspace_1": lambda m, dt: m.linspace(3, 3, steps=1, dtype=dt),
    "linspace_frac": lambda m, dt: m.linspace(-1.5, 2.5, steps=9, dtype=dt),
    "logspace": lambda m, dt: m.logspace(0, 2, steps=4, dtype=dt),
    "full_bool_fill": lambda m, dt: m.full((3,), True, dtype=dt),
    "full_neg": lambda m, dt: m.full((2, 3), -2, dtype=dt),
    "eye_square": lambda m, dt: m.eye(4, dtype=dt),
    "tril_ones": lambda m, dt: m.tril(m.ones(3, 4, dtype=dt)),
    "triu_ones": lambda m, dt: m.triu(m.ones(4, 3, dtype=dt), 1),
    "scalar_tensor": lambda m, dt: m.scalar_tensor(5, dtype=dt),
    "tensor_list": lambda m, dt: m.tensor([[0, 1, 2], [3, 4, 5]], dtype=dt),
    "new_full": lambda m, dt: m.ones(2).new_full((2, 2), 7, dtype=dt),
    "new_zeros": lambda m, dt: m.ones(2, dtype=dt).new_zeros(3),
}


def creation(rng: random.Random) -> Case:
    name, dtype = rng.choice(list(CREATION)), rng.choice(DTYPES)
    f = CREATION[name]
    use = rng.choice([lambda m, t: t, lambda m, t: t.to(m.float32) * 2, lambda m, t: t.sum(),
                      lambda m, t: t + m.ones_like(t), lambda m, t: t.flip(0).reshape(-1)[:3]])

    def run(m, s, d):
        return [use(m, f(m, getattr(m, dtype)))]
    return Case(f"creation:{name}:{dtype}", run, [], [], rtol=1e-2 if "16" in dtype else 1e-6)


def loop(rng: random.Random) -> Case:
    steps = rng.randint(5, 40)
    every = rng.randint(1, 4)
    lr = round(rng.uniform(0.001, 0.01), 4)

    def run(m, s, d):
        x, w, acc = m.tensor(d[0]), m.tensor(d[1]), m.zeros(d[0].shape[-1])
        seen = []
        for k in range(steps):
            loss = (w * x).sum()
            w = w - s[0] * loss * x
            acc = acc + w.mean(0)                         # pending across steps unless synced
            if k % every == 0:
                seen.append(loss.item())
        return [w, acc] + seen
    return Case("loop", run, [lr], normal_data(rng, (3, 8), 2), rtol=1e-3, atol=1e-4)


# How host data comes in; every one copies (docs/nn.md, Interop), so writes to the array after
# building must not reach a lazy result, as in torch where the result was computed eagerly.
CONSTRUCTORS = {"tensor": lambda m, a: m.tensor(a), "from_numpy": lambda m, a: m.from_numpy(a),
                "as_tensor": lambda m, a: m.as_tensor(a), "as_tensor_dtype": lambda m, a: m.as_tensor(a, dtype=m.float32)}
MUTATIONS = [lambda a: a.fill(1e6), lambda a: a.__setitem__(0, -a[0]), lambda a: np.multiply(a, 3, out=a),
             lambda a: a.__setitem__(..., a[::-1].copy())]


def numpy_mutation(rng: random.Random) -> Case:
    finish = rng.choice(FINISH)
    make = [rng.choice(list(CONSTRUCTORS)) for _ in range(2)]
    mutate = rng.choice(MUTATIONS)
    evaluate_first = rng.random() < 0.3      # one result evaluated before the writes, one after

    def run(m, s, d):
        arrays = [x.copy() for x in d]
        ts = [CONSTRUCTORS[k](m, a) for k, a in zip(make, arrays)]
        early = ts[0] * s[0] - ts[1]
        if evaluate_first:
            float(early.sum())
        out = finish(m, ts[0] * s[0] + ts[1])
        for a in arrays:
            mutate(a)
        return [out, early]
    return Case(f"numpy_mutation:{'/'.join(make)}", run, [0.75], normal_data(rng, (3, 6), 2))


# ---- writes through x.numpy(): the array shares the evaluated tensor's memory (torch's too) ----
# Values the programs keep are never views of another kept tensor: an evaluated lazytorch view
# holds its own buffer (docs/nn.md, Interop), where a torch view keeps sharing its base's memory.
# In-place ops run only on tensors with no array out: lazytorch gives an updated tensor a new
# buffer, while torch's in-place op writes the memory the array shows (a known difference).
WRITE_DTYPES = ["float32", "float32", "float64", "int64", "int32"]
WRITE_SHAPES = [(3, 4), (5,), (), (1, 3), (2, 1, 3), (0, 2)]
# ops over two kept tensors (same shape and dtype) and a Python scalar; views only inside
VALUE_OPS = [lambda m, a, b, s: a * s + b, lambda m, a, b, s: a - b, lambda m, a, b, s: m.maximum(a, b),
             lambda m, a, b, s: (a + s).abs(), lambda m, a, b, s: m.where(a > b, a, b * s),
             lambda m, a, b, s: a.flip(0) + b if a.ndim else a + b,
             lambda m, a, b, s: a.reshape(-1).reshape(a.shape) * b,
             lambda m, a, b, s: a - a.sum() if a.numel() else a + b,
             lambda m, a, b, s: (a * s).clamp(-2, 3) if a.dtype.is_floating_point else a + b]
IN_PLACE = [lambda t, s: t.mul_(s), lambda t, s: t.add_(t), lambda t, s: t.sub_(s),
            lambda t, s: t.clamp_(-1, 1)]


def _write(a: np.ndarray, how: int, value) -> None:
    """One write through an array the program holds (every form works on 0-d and empty arrays)."""
    if how == 0:
        a[...] = value
    elif how == 1:
        a.reshape(-1)[:1] = value               # (a view of the array: the same memory)
    elif how == 2:
        np.multiply(a, 2, out=a, casting="unsafe")
    elif how == 3:
        a[...] = a[::-1].copy() if a.ndim else -a
    else:
        np.add(a, value, out=a, casting="unsafe")


def numpy_writes(rng: random.Random) -> Case:
    """Writes through `x.numpy()` interleaved with lazy ops and partial evaluations: an array of an
    evaluated tensor shares its memory, so a write reaches the tensor and every result built from
    it afterwards, while results built before the write (pending or not) keep their values."""
    dtype = rng.choice(WRITE_DTYPES)
    shape = rng.choice(WRITE_SHAPES)
    n_in = rng.randint(2, 3)
    steps = []
    for k in range(rng.randint(8, 20)):
        steps.append(("numpy" if k == 1 else rng.choice(["op", "op", "op", "numpy", "numpy", "write", "write",
                                                         "write", "write", "eval", "in_place", "drop"]),
                      rng.randrange(1 << 16), rng.randrange(1 << 16), rng.randrange(len(VALUE_OPS)),
                      rng.randrange(5), rng.randrange(len(IN_PLACE))))
    integer = dtype.startswith("int")
    scalars = [float(rng.choice([2, 3, -1])) if integer else round(rng.uniform(-2, 2), 3) for _ in steps]
    g = np.random.default_rng(rng.randrange(1 << 30))
    data = [(g.integers(-5, 6, shape) if integer else g.standard_normal(shape)).astype(dtype) for _ in range(n_in)]

    def run(m, s, d):
        kept = [m.tensor(x) for x in d]          # (copies: the data's own arrays are never written)
        held: list[tuple[int, np.ndarray]] = []   # (index of the kept tensor, its array)
        seen = []
        for (what, i, j, op, how, ip), c in zip(steps, s):
            c = int(c) if integer else c
            a, b = kept[i % len(kept)], kept[j % len(kept)]
            if what == "op":
                kept.append(VALUE_OPS[op](m, a, b, c))
            elif what == "numpy":
                held.append((i % len(kept), a.numpy()))
            elif what == "write" and held:
                _write(held[j % len(held)][1], how, c)
            elif what == "eval":
                seen.append(float(a.sum()))
            elif what == "in_place" and all(k != i % len(kept) for k, _ in held) and a.dtype.is_floating_point:
                IN_PLACE[ip](a, c)
            elif what == "drop" and held:
                held.pop(j % len(held))
        return kept + seen + [arr.copy() for _, arr in held]
    # expect_hit off: the rerun's first evaluation is keyed by the program's tree summary where the
    # first run's was keyed by its node list (ir/build.py), so it compiles once more (same plan)
    return Case(f"numpy_writes:{shape}:{dtype}", run, scalars, data, rtol=1e-5, atol=1e-6, expect_hit=False)


GENERATORS = {"many_inputs": many_inputs, "long_chain": long_chain, "creation": creation, "loop": loop,
              "numpy_mutation": numpy_mutation}

GENERATORS.update(NN_GENERATORS)
GENERATORS["numpy_writes"] = numpy_writes        # (last: earlier campaigns keep their program numbers
                                                 #  per generator up to it)


# ---------------------------------------------------------------- running and comparing

def _host(v):
    if isinstance(v, (int, float, bool)):
        return np.asarray(v, np.float64)
    if isinstance(v, np.ndarray):
        return v.astype(np.float64) if v.dtype != np.bool_ else v
    if isinstance(v, torch.Tensor):
        return v.detach().to(torch.float64).numpy() if v.dtype != torch.bool else v.numpy()
    arr = np.asarray(v.detach().numpy())
    return arr.astype(np.float64) if arr.dtype != np.bool_ else arr


def _outcome(m, case: Case, scalars, data):
    try:
        return [_host(v) for v in case.run(m, scalars, data)], None
    except Exception as e:   # noqa: BLE001  (both must fail, or neither)
        return None, e


def compare(case: Case, scalars, data) -> str | None:
    """None when lazytorch agrees with torch (values, or both raising); else a verdict."""
    return judge(case, scalars, data)[0]


def judge(case: Case, scalars, data) -> tuple[str | None, bool]:
    """(verdict, whether lazytorch computed values rather than raising).  Floats agree within
    `rtol` of each value plus `atol` and `rtol` of the output's largest magnitude (a gradient
    through a large intermediate carries absolute rounding error to its small elements too)."""
    want, terr = _outcome(torch, case, scalars, data)
    got, lerr = _outcome(lt, case, scalars, data)
    if terr is not None or lerr is not None:
        if terr is not None and lerr is not None:
            return None, False
        if lerr is not None and case.kind.endswith("float64") and "float64" in str(lerr) \
                and lt.get_backend() in ("metal-emu", "metal", "cuda"):
            return None, False                            # a clear refusal of a dtype the device lacks
        err = lerr or terr
        return f"{'lazytorch' if lerr else 'torch'} raised {type(err).__name__}: {err}" + (
            "\n" + "".join(traceback.format_exception(lerr))[-1500:] if lerr else ""), lerr is None
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"output {k}: shape {g.shape} vs torch {w.shape}", True
        finite = np.abs(w[np.isfinite(w)]) if w.dtype != np.bool_ else np.zeros(0)
        atol = case.atol + case.rtol * (float(finite.max()) if finite.size else 0.0)
        if not np.allclose(g, w, rtol=case.rtol, atol=atol, equal_nan=True):
            bad = np.argmax(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)).reshape(-1)) if g.size else 0
            return f"output {k}: {g.reshape(-1)[bad]} vs torch {w.reshape(-1)[bad]} (max at flat {bad})", True
    return None, True


def check(case: Case, rng: random.Random) -> str | None:
    """Run the case, then the same structure with other Python scalars and other data: the second
    run must agree with torch too, and (when the case expects it) hit the graph cache."""
    verdict, computed = judge(case, case.scalars, case.data)
    if verdict is not None:
        return verdict
    scalars = other_scalars(case.scalars, rng)
    data = [other_data(x, rng) for x in case.data]
    misses = lt.cache_info().misses
    verdict = compare(case, scalars, data)
    # a program that raised compiled nothing to hit (a failed compile inserts no cache entry)
    if verdict is None and computed and case.expect_hit and lt.cache_info().misses != misses:
        return f"rerun with other scalars compiled again ({lt.cache_info().misses - misses} misses)"
    return verdict and f"rerun: {verdict}"


@dataclass
class Campaign:
    backend: str
    programs: int = 0
    by_kind: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.by_kind.items()))
        return (f"{self.backend}: {self.programs} programs, {len(self.failures)} failures, "
                f"{self.seconds:.0f} s ({kinds})")


def run_stress(backend: str, programs: int, seed: int = 0, kinds=None, log=None, offset: int = 0) -> Campaign:
    """Programs offset .. offset+programs-1 of campaign `seed` (each program has its own seed, so a
    shard of a campaign draws exactly the programs the whole campaign would)."""
    kinds = list(kinds or GENERATORS)
    previous = lt.get_backend()
    lt.set_backend(backend)
    camp = Campaign(backend)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(offset, offset + programs):
                rng = random.Random(seed * 1_000_003 + i)
                kind = kinds[i % len(kinds)]
                case = GENERATORS[kind](rng)
                verdict = check(case, rng)
                camp.programs += 1
                camp.by_kind[kind] = camp.by_kind.get(kind, 0) + 1
                if verdict is not None:
                    camp.failures.append((seed, i, case.kind, verdict))
                    if log:
                        log(f"FAIL {backend} seed={seed} program={i} {case.kind}: {verdict}")
                if log and camp.programs % 25 == 0:
                    log(f"{backend}: {camp.programs} programs, {len(camp.failures)} failures, "
                        f"{time.perf_counter() - start:.0f} s")
    finally:
        lt.set_backend(previous)
    camp.seconds = time.perf_counter() - start
    return camp


def _shard(backend: str, programs: int, seed: int, offset: int, kinds, log_path: str | None, tag: str,
           gc_threshold: int = 0) -> Campaign:
    torch.set_num_threads(1)
    if gc_threshold:
        gc.set_threshold(gc_threshold, 1, 1)

    log = tee_log(log_path, lambda text: f"{tag} {text}")
    return run_stress(backend, programs, seed, kinds, log=log, offset=offset)


def run_sharded(backend: str, programs: int, seed: int, kinds, jobs: int, log, log_path: str | None,
                gc_threshold: int = 0) -> Campaign:
    """`run_stress` over `jobs` processes, each on its own range of program numbers; one report."""
    if jobs <= 1:
        return run_stress(backend, programs, seed, kinds, log=log)
    import multiprocessing
    from .run import shards
    t0 = time.perf_counter()
    ranges = shards(0, programs, jobs)
    with multiprocessing.get_context("spawn").Pool(len(ranges)) as pool:
        parts = pool.starmap(_shard, [(backend, n, seed, first, kinds, log_path,
                                       f"[shard {j} programs {first}..{first + n - 1}]", gc_threshold)
                                      for j, (first, n) in enumerate(ranges)])
    camp = Campaign(backend, seconds=time.perf_counter() - t0)
    for part in parts:
        camp.programs += part.programs
        camp.failures += part.failures
        for k, v in part.by_kind.items():
            camp.by_kind[k] = camp.by_kind.get(k, 0) + v
    return camp


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.stress", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=600)
    ap.add_argument("--backends", default="reference")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="processes, each on its own range of programs")
    ap.add_argument("--log")
    ap.add_argument("--kinds", help=f"comma-separated generators (default all: {','.join(GENERATORS)})")
    ap.add_argument("--gc-threshold", type=int, default=0,
                    help="collect garbage every N allocations (gc.set_threshold(N, 1, 1)): dead autograd "
                         "graphs are collected at many more points of a program's life")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.gc_threshold:
        gc.set_threshold(args.gc_threshold, 1, 1)

    log = tee_log(args.log)
    failed = False
    for b in args.backends.split(","):
        camp = run_sharded(b, args.programs, args.seed, args.kinds and args.kinds.split(","), args.jobs, log, args.log,
                           args.gc_threshold)
        log(f"# DONE {camp.summary()}")
        failed |= bool(camp.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
