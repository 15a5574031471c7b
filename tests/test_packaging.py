"""The built wheel works on its own: it carries the kernel templates (shaders/ mapped into the
package as lazytorch.shaders by setup.py) and compiles and runs a kernel from a fresh environment,
away from the source tree."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """
import numpy as np, lazytorch as lt
from lazytorch.codegen.render import shader_dir
lt.set_backend("cpu")
x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
got = lt.from_numpy(x).softmax(-1).numpy()
e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
assert np.abs(got - e / e.sum(-1, keepdims=True)).max() < 1e-6
print("from", lt.__file__, "templates", shader_dir())
"""


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="needs a C compiler")
def test_wheel_installs_and_compiles_a_kernel(tmp_path):
    src = tmp_path / "src"
    for name in ("lazytorch", "shaders"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"),
                    str(src)], check=True, capture_output=True, timeout=120)
    (wheel,) = (tmp_path / "dist").glob("lazytorch-*.whl")
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(env_dir)],
                   check=True, capture_output=True, timeout=60)
    python = env_dir / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", "--no-build-isolation", "-q",
                    str(wheel)], check=True, capture_output=True, timeout=120)
    # the dependencies (numpy, jinja2, ...) come from this interpreter's site-packages, after the
    # fresh environment's own (which holds the installed wheel)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LAZYTORCH_BACKEND")}
    env["LAZYTORCH_CACHE_DIR"] = str(tmp_path / "cache")
    out = subprocess.run([str(python), "-c", PROGRAM], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"from {site}" in out.stdout and f"templates {site}/lazytorch/shaders" in out.stdout, out.stdout
