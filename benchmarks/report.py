"""Presenting a run: markdown tables (the terminal shows the same text), JSON, the ratio chart."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


def fmt_time(s: float) -> str:
    """Three significant digits in the largest unit that keeps the number at least 1."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if float(f"{s / scale:.3g}") >= 1 or unit == "ns":
            return f"{s / scale:.3g} {unit}"


@dataclass
class Column:
    header: str
    key: str
    fmt: Callable[[object], str] = str


COLUMNS = [
    Column("framework", "framework"),
    Column("status", "status"),
    Column("median", "median_s", fmt_time),
    Column("min", "min_s", fmt_time),
    Column("samples", "samples"),
    Column("first call", "first_call_s", fmt_time),
    Column("× ideal", "ratio_to_ideal", lambda v: f"{v:.2f}"),
    Column("GFLOP/s", "gflops", lambda v: f"{v:.1f}"),
    Column("÷ best matmul", "ratio_to_matmul", lambda v: f"{v:.2f}"),
    Column("µs/call (median)", "us_per_call", lambda v: f"{v:.1f}"),
    Column("÷ torch", "ratio_to_torch", lambda v: f"{v:.2f}"),
    Column("÷ torch.compile", "ratio_to_torch.compile", lambda v: f"{v:.2f}"),
    Column("import", "import_s", fmt_time),
    Column("first eval, cold cache", "cold_first_s", fmt_time),
    Column("first eval, warm cache", "warm_first_s", fmt_time),
    Column("steady", "steady_s", fmt_time),
    Column("max abs err", "max_abs_err", lambda v: f"{v:.1e}"),
    Column("note", "error", lambda v: str(v).replace("|", "\\|")[:160]),
]


def table(rows: list[dict]) -> str:
    """A markdown table with the columns that at least one row fills."""
    cols = [c for c in COLUMNS if any(r.get(c.key) is not None for r in rows)]
    lines = ["| " + " | ".join(c.header for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [c.fmt(r[c.key]) if r.get(c.key) is not None else "" for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def limit_line(w: dict, bandwidth: dict) -> str:
    """What the ratios are measured against."""
    if w.get("bytes_moved"):
        return (f"Ideal: {w['bytes_formula']} = {w['bytes_moved'] / 1e6:.1f} MB at "
                f"{bandwidth['gb_per_s']:.1f} GB/s copy bandwidth = {fmt_time(w['ideal_s'])}.")
    roof = w.get("matmul_roof")
    if roof:
        rates = ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k}: {v}" for k, v in roof["gflops"].items())
        return f"FLOPs: {w['flops_formula']} = {w['flops'] / 1e9:.2f} GFLOP. Plain matmul GFLOP/s: {rates}."
    return ""


def markdown(run: dict) -> str:
    m, bw = run["machine"], run["copy_bandwidth"]
    out = [f"Command: `{run['command']}`", "",
           f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']:.0f} GiB, {m['os']}; "
           f"Python {m['python']}; " + ", ".join(f"{k} {v}" for k, v in m["versions"].items())
           + f"; lazytorch commit {m['lazytorch_commit']}; {m['date']}; "
           f"load average {m['load_average']} at the start.", "",
           f"Copy bandwidth ({bw.get('how', 'numpy copyto')}, {bw['array_bytes'] / 2 ** 20:.0f} MiB array, read + write): "
           f"{bw['gb_per_s']:.1f} GB/s (median of {bw['samples']}).", ""]
    for w in run["workloads"]:
        sizes = ", ".join(f"{k}={v}" for k, v in w["sizes"].items())
        out += [f"### {w['name']}: {w['title']}" + (f" ({sizes})" if sizes else ""), ""]
        if w.get("skipped"):
            out += [f"Skipped: {w['skipped']}", ""]
            continue
        line = limit_line(w, bw)
        out += ([line, ""] if line else []) + [table(w["results"]), ""]
        if any(r.get("interleaved") for r in w["results"]):
            out += ["Samples interleaved: one of each framework's in turn, round after round.", ""]
        counted = [r for r in w["results"] if r.get("per_call")]
        if counted:
            out += ["Per timed call: " + "; ".join(r["framework"] + " " + ", ".join(
                f"{k} {v:g}" for k, v in r["per_call"].items()) for r in counted) + ".", ""]
    return "\n".join(out)


def write_json(run: dict, path: Path) -> None:
    path.write_text(json.dumps(run, indent=1, default=str) + "\n")


def chart(run: dict, path: Path) -> str | None:
    """Bar chart of × ideal (W1–W4) and ÷ best matmul (W5–W6); returns a note if it can't."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'); no chart"
    panels = [("ratio_to_ideal", "time ÷ ideal time (lower is better)", True),
              ("ratio_to_matmul", "GFLOP/s ÷ best plain matmul (higher is better)", False)]
    panels = [p for p in panels if any(r.get(p[0]) for w in run["workloads"] for r in w.get("results", []))]
    if not panels:
        return "no ratios to chart"
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.5), squeeze=False)
    for ax, (key, label, log) in zip(axes[0], panels):
        ws = [w for w in run["workloads"] if any(r.get(key) for r in w.get("results", []))]
        names = run["frameworks"]
        width = 0.8 / max(1, len(names))
        for i, name in enumerate(names):
            vals = [next((r.get(key) or 0 for r in w["results"] if r["framework"] == name), 0) for w in ws]
            ax.bar([j + i * width for j in range(len(ws))], vals, width, label=name)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(ws))], [w["name"] for w in ws])
        ax.set_ylabel(label)
        if log:
            ax.set_yscale("log")
            ax.axhline(1.0, color="black", linewidth=0.8)
        ax.legend(fontsize=8)
    fig.suptitle(f"lazytorch benchmarks — {run['machine']['cpu']}, {run['machine']['cores']} cores")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
