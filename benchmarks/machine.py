"""What the numbers were measured on: CPU, cores, memory, OS, versions, date, commit."""
from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONED = ("numpy", "torch", "mlx", "lazytorch", "matplotlib")   # distribution names


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gb() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    except (ValueError, OSError, AttributeError):
        return None


def version(distribution: str) -> str | None:
    """The installed version, read from package metadata (importing torch would cost seconds)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_commit() -> str | None:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("+dirty" if dirty else "") if sha else None
    except (OSError, subprocess.SubprocessError):
        return None


def machine_info() -> dict:
    return {
        "cpu": cpu_model(), "cores": os.cpu_count(), "memory_gb": memory_gb(),
        "os": platform.platform(), "python": platform.python_version(),
        "versions": {name: version(name) for name in VERSIONED},
        "lazytorch_commit": git_commit(),
        # The machine may be shared: the 1-minute load average says how busy it was.
        "load_average": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
