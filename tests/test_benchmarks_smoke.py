"""The benchmark harness runs end to end (quick mode) and checks results before timing them.
No timing assertions: only that the run completes, reports what it should and the math is right."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root holds benchmarks/

from benchmarks.cli import main  # noqa: E402
from benchmarks.runner import check  # noqa: E402
from benchmarks.timing import QUICK, measure_interleaved  # noqa: E402


def run_quick(tmp_path: Path, *args: str) -> dict:
    assert main(["--quick", "--out", str(tmp_path), *args]) == 0
    return json.loads((tmp_path / "results.json").read_text())


def test_quick_run_reports_checked_timings(tmp_path):
    run = run_quick(tmp_path, "--workloads", "W1,W7", "--backends", "reference", "--peers", "numpy")
    machine = run["machine"]
    for key in ("cpu", "cores", "memory_gb", "os", "python", "date"):
        assert machine[key], key
    assert set(machine["versions"]) >= {"numpy", "torch", "mlx", "lazytorch"}
    assert run["copy_bandwidth"]["gb_per_s"] > 0
    assert [w["name"] for w in run["workloads"]] == ["W1", "W7"]
    w1, w7 = run["workloads"]
    assert w1["bytes_moved"] == 4 * w1["sizes"]["N"] * 4 and w1["ideal_s"] > 0
    for w in (w1, w7):
        assert [r["framework"] for r in w["results"]] == ["lazytorch[reference]", "numpy"]
        for r in w["results"]:
            assert r["status"] == "ok", r.get("error")
            assert r["max_abs_err"] <= 1e-4 * r["ref_max_abs"]
            assert 0 < r["min_s"] <= r["median_s"] and r["samples"] >= 2
    assert all("ratio_to_ideal" in r for r in w1["results"])
    assert all("us_per_call" in r for r in w7["results"])
    assert all(r.get("interleaved") for r in w7["results"]) and not any(r.get("interleaved") for r in w1["results"])
    assert "| lazytorch[reference] | ok |" in (tmp_path / "results.md").read_text()


def test_a_failing_framework_is_a_row_not_a_crash(tmp_path):
    run = run_quick(tmp_path, "--workloads", "W7", "--backends", "no-such-backend", "--peers", "numpy")
    failed, numpy_row = run["workloads"][0]["results"]
    assert failed["status"] == "error" and "no-such-backend" in failed["error"]
    assert numpy_row["status"] == "ok"


def test_check_reports_wrong_results():
    ref = np.linspace(-1.0, 1.0, 11)
    assert check(ref.astype(np.float32), ref, 1e-4)["status"] == "ok"
    assert check(ref[::-1], ref, 1e-4)["status"] == "wrong"
    assert check(ref[:5], ref, 1e-4)["status"] == "wrong"
    assert check(np.full_like(ref, np.nan), ref, 1e-4)["status"] == "wrong"


def test_interleaved_samples_take_turns():
    """measure_interleaved: after each call's warm-up, one sample of each per round, the hooks
    around every sample, untimed, told how many calls it made."""
    order, made = [], {"a": 0, "b": 0}

    def call(name):
        def run():
            made[name] += 1
        return run
    told = {"a": 0, "b": 0}
    hooks = {name: (lambda name=name: order.append(name)) for name in made}
    counts = {name: (lambda n, name=name: told.__setitem__(name, told[name] + n)) for name in made}
    timings = measure_interleaved({"a": call("a"), "b": call("b")}, QUICK, hooks, counts)
    rounds = order[2:]                      # (the first two: each one's warm-up)
    assert rounds == ["a", "b"] * (len(rounds) // 2) and len(rounds) >= 2 * QUICK.min_repeats
    for name, t in timings.items():
        assert t.samples == len(rounds) // 2 and 0 < t.min_s <= t.median_s
        assert told[name] == t.samples * t.calls_per_sample
        assert made[name] == told[name] + QUICK.warmup + 1       # (+ the call sizing a sample)
