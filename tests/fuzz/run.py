"""A fuzz campaign: many seeded programs on one backend, batched, mismatches shrunk and printed."""
from __future__ import annotations

import multiprocessing
import re
import time
from dataclasses import dataclass, field
from functools import partial

from .compare import compare, compare_batch
from .generate import generate
from .program import DTYPES, repro
from .shrink import kind, shrink

# dtypes a backend supports (Metal has no float64: the metal backends refuse it by design)
BACKEND_DTYPES = {"metal": tuple(d for d in DTYPES if d != "float64"),
                  "metal-emu": tuple(d for d in DTYPES if d != "float64")}


@dataclass
class Mismatch:
    seed: int
    verdict: str
    code: str                       # the shrunk program as runnable Python
    signature: tuple = ()           # (kind, signature): one shrunk example per signature


@dataclass
class Campaign:
    backend: str
    programs: int = 0
    torch_errors: int = 0           # programs torch rejects (lazytorch must reject them too)
    mismatches: list[Mismatch] = field(default_factory=list)   # one shrunk example per signature
    seen: dict[tuple, int] = field(default_factory=dict)        # (kind, signature) -> failing programs
    seconds: float = 0.0

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for (k, _), n in self.seen.items():
            kinds[k] = kinds.get(k, 0) + n
        return (f"{self.backend}: {self.programs} programs ({self.torch_errors} invalid in torch), "
                f"{sum(self.seen.values())} failing programs {kinds or ''}, {len(self.seen)} distinct, "
                f"in {self.seconds:.0f}s")


def run_campaign(backend: str, programs: int, seed: int = 0, batch: int = 40, shrink_budget: int = 80,
                 log=None, max_steps: int = 8, max_shrunk: int = 50) -> Campaign:
    """Fuzz `programs` programs (seeds seed, seed+1, ...) on `backend`; mismatches come back shrunk."""
    dtypes = BACKEND_DTYPES.get(backend, DTYPES)
    camp = Campaign(backend)
    t0 = time.time()
    for start in range(seed, seed + programs, batch):
        seeds = list(range(start, min(start + batch, seed + programs)))
        progs = [generate(s, dtypes, max_steps) for s in seeds]
        for s, p, v in zip(seeds, progs, compare_batch(progs, backend)):
            camp.programs += 1
            camp.torch_errors += p.outputs == () or _torch_rejects(p)
            if v is None:
                continue
            sig = (kind(v), signature(v, s))
            camp.seen[sig] = camp.seen.get(sig, 0) + 1
            if camp.seen[sig] > 1 or len(camp.mismatches) >= max_shrunk:
                continue                      # counted; already shrunk one like it
            small = shrink(p, partial(compare, backend=backend), shrink_budget)
            mismatch = Mismatch(s, compare(small, backend) or v, repro(small, backend), sig)
            camp.mismatches.append(mismatch)
            if log:
                log(f"# MISMATCH seed={s} backend={backend}: {mismatch.verdict}\n{mismatch.code}\n")
        camp.seconds = time.time() - t0
        if log:
            log(f"# progress {camp.summary()}")
    return camp


def merge(backend: str, parts: list[Campaign], seconds: float) -> Campaign:
    """One report from the campaigns of several shards (counts summed, one example per signature)."""
    camp = Campaign(backend, seconds=seconds)
    for part in parts:
        camp.programs += part.programs
        camp.torch_errors += part.torch_errors
        for sig, n in part.seen.items():
            camp.seen[sig] = camp.seen.get(sig, 0) + n
        known = {m.signature for m in camp.mismatches}
        camp.mismatches += [m for m in part.mismatches if m.signature not in known]
    return camp


def shards(seed: int, programs: int, jobs: int) -> list[tuple[int, int]]:
    """(first seed, count) of each of `jobs` contiguous seed ranges covering seed .. seed+programs-1."""
    jobs = max(1, min(jobs, programs))
    base, extra = divmod(programs, jobs)
    out, start = [], seed
    for j in range(jobs):
        count = base + (j < extra)
        out.append((start, count))
        start += count
    return out


def tee_log(path: str | None, tag=lambda text: text):
    """A campaign's log: each text (tagged by `tag`) printed and, with a path, appended to that file."""
    def log(text: str) -> None:
        text = tag(text)
        print(text, flush=True)
        if path:
            with open(path, "a") as f:
                f.write(text + "\n")
    return log


def _shard(backend: str, seed: int, programs: int, batch: int, max_steps: int, log_path: str | None,
           tag: str) -> Campaign:
    import warnings
    import torch
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=UserWarning)

    log = tee_log(log_path, lambda text: "\n".join(f"{tag} {line}" if line.startswith("# ") else line
                                                  for line in text.split("\n")))
    return run_campaign(backend, programs, seed, batch, log=log, max_steps=max_steps)


def run_sharded(backend: str, programs: int, seed: int = 0, jobs: int = 1, batch: int = 40, log=None,
                log_path: str | None = None, max_steps: int = 8) -> Campaign:
    """`run_campaign` over `jobs` processes, each on its own seed range; one merged report.  The
    shards append their progress to `log_path` (tagged `[shard j]`); `log` gets the merged summary."""
    if jobs <= 1:
        return run_campaign(backend, programs, seed, batch, log=log, max_steps=max_steps)
    t0 = time.time()
    ranges = shards(seed, programs, jobs)
    ctx = multiprocessing.get_context("spawn")      # torch and the kernel caches must not be forked
    with ctx.Pool(len(ranges)) as pool:
        parts = pool.starmap(_shard, [(backend, s, n, batch, max_steps, log_path, f"[shard {j} seeds {s}..{s + n - 1}]")
                                      for j, (s, n) in enumerate(ranges)])
    camp = merge(backend, parts, time.time() - t0)
    if log:
        for m in camp.mismatches:
            log(f"# MISMATCH seed={m.seed} backend={backend}: {m.verdict}\n{m.code}\n")
    return camp


def signature(verdict: str, seed: int) -> str:
    """Errors without their numbers, paths and hashes (one cause, one signature); wrong results
    are each their own (their causes cannot be told apart from the verdict)."""
    if kind(verdict) in ("values", "shape", "dtype"):
        return str(seed)
    return re.sub(r"[0-9a-f]{16,}|\d+|'[^']*'|\[[^\]]*\]", "#", verdict)


def _torch_rejects(program) -> bool:
    from .compare import run_torch
    return run_torch(program).stage != "ok"
