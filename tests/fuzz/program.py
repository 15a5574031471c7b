"""A fuzz program: input tensors, straight-line steps and outputs, as data that renders to Python.

Each step is one line `v<k> = <expr>` where expr names earlier values `v<i>` and the module `m`
(lazytorch or torch: both spell the API the same).  Rendering to source and exec'ing it means the
repro printed for a mismatch is exactly the code that ran.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("uint8", "int8", "int32", "int64")
DTYPES = ("bool",) + INTS + FLOATS


@dataclass(frozen=True)
class Input:
    shape: tuple[int, ...]
    dtype: str
    seed: int
    specials: bool = False           # sprinkle nan/inf/0 into float data

    def data(self) -> np.ndarray:
        """The values (float data as float64, rounded to the dtype by the tensor constructor)."""
        rng = np.random.default_rng(self.seed)
        if self.dtype == "bool":
            return rng.random(self.shape) < 0.5
        if self.dtype in INTS:
            lo = 0 if self.dtype == "uint8" else -5
            return rng.integers(lo, 11 if lo == 0 else 6, size=self.shape).astype(self.dtype)
        values = rng.uniform(-3, 3, size=self.shape)
        if self.specials and values.size:
            flat = values.reshape(-1)
            idx = rng.integers(0, flat.size, size=max(1, flat.size // 5))
            flat[idx] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], size=idx.size)
        return values


@dataclass(frozen=True)
class Step:
    expr: str                        # e.g. "m.add(v0, v1, alpha=2)" or "v2[::2]"
    refs: tuple[int, ...]            # values it reads (for dead-code removal and rewiring)


@dataclass(frozen=True)
class Program:
    inputs: tuple[Input, ...]
    steps: tuple[Step, ...] = ()
    outputs: tuple[int, ...] = ()    # value indices; values are inputs first, then steps

    @property
    def n_values(self) -> int:
        return len(self.inputs) + len(self.steps)

    def source(self) -> str:
        """`def prog(m, v0, v1, ...)` returning the outputs."""
        args = ", ".join(f"v{i}" for i in range(len(self.inputs)))
        lines = [f"def prog(m, {args}):" if args else "def prog(m):"]
        base = len(self.inputs)
        lines += [f"    v{base + k} = {s.expr}" for k, s in enumerate(self.steps)]
        lines.append(f"    return ({''.join(f'v{o}, ' for o in self.outputs)})")
        return "\n".join(lines)

    def function(self):
        namespace: dict = {}
        exec(compile(self.source(), "<fuzz program>", "exec"), namespace)
        return namespace["prog"]

    def with_(self, **changes) -> "Program":
        return replace(self, **changes)


def make_inputs(program: Program, module) -> list:
    """Fresh tensors holding each input's data, in `module` (torch or lazytorch)."""
    import torch
    out = []
    for inp in program.inputs:
        t = torch.tensor(inp.data(), dtype=getattr(torch, inp.dtype))
        if module is torch:
            out.append(t)
        elif inp.dtype == "bfloat16":
            out.append(module.tensor(t.float().numpy(), dtype=module.bfloat16))
        else:
            out.append(module.from_numpy(t.numpy().copy()))
    return out


def repro(program: Program, backend: str) -> str:
    """Standalone Python that runs the program with lazytorch and torch and prints both results."""
    lines = ["import numpy as np", "import torch", "import lazytorch as lt", "",
             f"lt.set_backend({backend!r})", ""]
    for i, inp in enumerate(program.inputs):
        t = _torch_literal(inp)
        lines.append(f"x{i} = {t}")
    lines += ["", program.source(), ""]
    args = ", ".join(f"x{i}" for i in range(len(program.inputs)))
    lt_args = ", ".join(_to_lt(f"x{i}", inp.dtype) for i, inp in enumerate(program.inputs))
    lines += [f"want = prog(torch{', ' if args else ''}{args})",
              f"got = prog(lt{', ' if lt_args else ''}{lt_args})",
              "lt.eval(*got)",
              "for g, w in zip(got, want):",
              "    print('lazytorch', g.dtype, tuple(g.shape), g.numpy().tolist())",
              "    print('torch    ', w.dtype, tuple(w.shape), w.float().numpy().tolist() "
              "if w.dtype == torch.bfloat16 else w.numpy().tolist())"]
    return "\n".join(lines)


def _torch_literal(inp: Input) -> str:
    import torch
    t = torch.tensor(inp.data(), dtype=getattr(torch, inp.dtype))
    values = (t.double() if inp.dtype in FLOATS else t).tolist()
    text = repr(values).replace("nan", "float('nan')").replace("inf", "float('inf')")
    return f"torch.tensor({text}, dtype=torch.{inp.dtype}).reshape({tuple(inp.shape)})"


def _to_lt(name: str, dtype: str) -> str:
    if dtype == "bfloat16":
        return f"lt.tensor({name}.float().numpy(), dtype=lt.bfloat16)"
    return f"lt.from_numpy({name}.numpy().copy())"

