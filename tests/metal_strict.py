"""The strict Metal front-end check: Metal sources compiled by clang as C++ (syntax and types only)
against shaders/metal_shim.h with LT_STRICT_ADDRESS_SPACES, where `device`, `constant` and
`threadgroup` are distinct clang address spaces.  A pointer passed across address spaces, a buffer
pointer without its qualifier, an undeclared identifier or a Metal-only function the shim does not
declare fails here as it would on Apple's compiler.  It does not prove the kernel compiles on a
Mac (Metal attributes are only parsed, the standard library is the shim's subset): see
docs/architecture.md, "What is verified where".

Many kernels are checked in one clang run: each assembled source goes into its own namespace.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from lazytorch.codegen.render import shader_dir

CLANG = shutil.which("clang++")
FLAGS = ["-std=c++17", "-fsyntax-only", "-x", "c++", "-DLT_STRICT_ADDRESS_SPACES", "-Wno-unknown-attributes",
         "-ferror-limit=50"]
BATCH = 1000          # kernels per clang run: ~1 s to parse the shim, then ~7 ms per kernel


def check(sources: list[str]) -> list[tuple[str, str]]:
    """(source, clang's errors) of each source that fails; [] when all pass."""
    failures = []
    for start in range(0, len(sources), BATCH):
        failures += _check_batch(sources[start:start + BATCH])
    return failures


def _check_batch(sources: list[str]) -> list[tuple[str, str]]:
    text, starts = "", []
    for i, src in enumerate(sources):
        starts.append(text.count("\n") + 2)
        text += f"namespace lt_strict_{i} {{\n{src}\n}}\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernels.metal"
        path.write_text(text)
        r = subprocess.run([CLANG, *FLAGS, "-include", str(shader_dir() / "metal_shim.h"), str(path)],
                           capture_output=True, text=True, timeout=600)
    if r.returncode == 0:
        return []
    bad: dict[int, list[str]] = {}
    for m in re.finditer(rf"{re.escape(str(path))}:(\d+):\d+: error: .*", r.stderr):
        line = int(m.group(1))
        k = max(i for i, s in enumerate(starts) if s <= line)
        bad.setdefault(k, []).append(m.group(0).split("error: ", 1)[1])
    if not bad:                     # an error outside the kernels (the shim itself)
        return [("<shim>", r.stderr[-3000:])]
    return [(sources[k], "\n".join(errs)) for k, errs in sorted(bad.items())]


class Collector:
    """Records the source of every generated Metal kernel metal-emu runs (installed for a test
    session; hand-written kernels of the emulator's own tests are not the generator's)."""

    def __init__(self) -> None:
        self.sources: dict[str, None] = {}
        self._lock = threading.Lock()

    def install(self, monkeypatch) -> None:
        from lazytorch.codegen.targets.metal import assemble
        from lazytorch.runtime import metal_emu
        real = metal_emu.launch_call

        def recording(launch, target):
            call = real(launch, target)
            if call is not None:
                with self._lock:
                    self.sources.setdefault(assemble(call).source, None)
            return call
        monkeypatch.setattr(metal_emu, "launch_call", recording)
