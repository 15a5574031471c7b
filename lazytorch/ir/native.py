"""The optional C versions of the IR's hottest Python (ir/_fastpath.c, built by setup.py).

`NATIVE` is that extension module, or None where it did not build (no C compiler or Python
headers) or `LAZYTORCH_NATIVE=0` turns it off.  Each user keeps its Python version as the
definition and installs the C one only where NATIVE is set: ir/build.py fast_builder (FastOp: the
Tensor API's pointwise builds, `tensor <op> number`, `x + y`, `x.sigmoid()`), call_memo.py
(ApiCall: the Tensor API's replayed calls, `F.linear`, `x.view`), ir/replay.py (Signer: a call's signature; Replayer:
Recording.replay; ViewBases: _bases, a signature's view bases), ir/node.py (SiteFinder: user_site), ir/graph.py (LeafArgs: leaf_args;
ProgramMaker: program, an eval's walk, and pending_positions and reaches, the live-tensor sync's
lookups; Positions: their tables, and reach_memo), tensor.py (AloneTaker: realize.py's LiveTensors.alone,
its common case), autograd/state.py (Classifier: classify, which new nodes require grad), autograd/engine.py
(BackwardWalker: _walk, the backward's order and its walk, replaying the memo's rule applications).
tests/test_fastpath.py compares each C version with its Python.
"""
from __future__ import annotations

import os


def switched_off() -> bool:
    """`LAZYTORCH_NATIVE=0`: every optional compiled part stays off (this module's extension and
    runtime/_rows.c's product kernel, runtime/library.py), the Python and the BLAS run instead."""
    return os.environ.get("LAZYTORCH_NATIVE", "1") == "0"


try:
    from . import _fastpath as NATIVE
except ImportError:
    NATIVE = None
if switched_off():
    NATIVE = None
