"""A fuzz campaign: many seeded programs on one backend, batched, mismatches shrunk and printed."""
from __future__ import annotations

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
            mismatch = Mismatch(s, compare(small, backend) or v, repro(small, backend))
            camp.mismatches.append(mismatch)
            if log:
                log(f"# MISMATCH seed={s} backend={backend}: {mismatch.verdict}\n{mismatch.code}\n")
        camp.seconds = time.time() - t0
        if log:
            log(f"# progress {camp.summary()}")
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
