"""Differential fuzzing of lazytorch against torch: random lazy programs, compared per backend.

    python -m tests.fuzz --programs 10000 --backends cpu,metal-emu --seed 0

generate.py builds seeded random programs, compare.py runs them with both libraries and judges the
difference, shrink.py reduces a failing program to a minimal one, program.py prints it as runnable
Python.  tests/test_fuzz.py runs a short campaign in the test suite.  `--jobs N` shards a campaign over
N processes (run.py `run_sharded`).  stress.py and stress_nn.py hold the whole-program generators
(many inputs, long chains, creation x dtype, loops, host-data writes, gradients, modules):
`python -m tests.fuzz.stress`.
"""
from .compare import compare, compare_batch
from .generate import generate
from .program import Program, repro
from .run import BACKEND_DTYPES, Campaign, run_campaign
from .shrink import shrink

__all__ = ["BACKEND_DTYPES", "Campaign", "Program", "compare", "compare_batch", "generate", "repro",
           "run_campaign", "shrink"]
