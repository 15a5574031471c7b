"""W8's fresh process: import a framework, run one workload once (the first evaluation, timed),
check it, time the steady state, and print one JSON line.  Started by runner.cold_start.

    python -m benchmarks.cold_start --workload W1 --framework "lazytorch[cpu]" [--quick]
"""
from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import time


def compile_bytecode() -> None:
    """Compile lazytorch's (and this harness's) modules to bytecode before the timed part, as an
    installed package has them (pip compiles at install).  Run from a source checkout under
    PYTHONDONTWRITEBYTECODE=1, every fresh process would otherwise compile each module it imports,
    the code generator's included (the README demo's first call: ~1.0 s against ~0.45 s)."""
    for name in ("lazytorch", "benchmarks"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            compileall.compile_dir(os.path.dirname(spec.origin), quiet=2)


def main() -> None:
    compile_bytecode()
    t0 = time.perf_counter()
    p = argparse.ArgumentParser()
    p.add_argument("--workload", required=True)
    p.add_argument("--framework", required=True)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    from .frameworks import by_name
    from .runner import check, describe, prepared_call, reference
    from .timing import QUICK, measure
    from .workloads import BY_NAME, make_inputs
    w, fw = BY_NAME[args.workload], by_name(args.framework)
    inputs = make_inputs(w, args.quick)
    row: dict = {"framework": fw.name}
    try:
        fw.ops()  # imports the framework
        row["import_s"] = time.perf_counter() - t0
        call = prepared_call(w, fw, inputs)
        t1 = time.perf_counter()
        out = call()
        row["first_call_s"] = time.perf_counter() - t1
        row.update(check(fw.to_numpy(out), reference(w, inputs), w.tol))
        if row["status"] == "ok":
            row["median_s"] = measure(call, QUICK).median_s
    except Exception as exc:
        row.update(status="error", error=describe(exc))
    print(json.dumps(row))


if __name__ == "__main__":
    main()
