"""The verify report: JSON, a readable text summary, and a PNG of both loss curves."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path


def _clean(value):
    """JSON without NaN/Infinity (they become the strings "nan", "inf", "-inf")."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _num(value) -> str:
    return "-" if value is None else (f"{value:.8g}" if isinstance(value, float) else str(value))


def summary(report: dict) -> str:
    lines = [f"npu-migrate verify {report['script']}: {report['verdict'].upper()}"]
    if report.get("reason"):
        lines.append(f"  {report['reason']}")
    lines.append(f"  migrated twin on {report['device']}; reference: the CPU twin; {report['nproc']} process(es), "
                 f"{report['steps_requested']} step(s); precision {report['precision']['mode']}")
    first = report.get("first_divergence")
    if first:
        lines.append(f"  first diverging step: {first['step']} (rank {first['rank']}): " + "; ".join(first["what"]))
    for item in report.get("silent_cpu", []):
        lines.append(f"  silent CPU work at step {item['step']} (rank {item['rank']}): {item['detail']}")
    exact = report["precision"]["mode"] == "fp32"
    if report.get("steps"):
        lines.append("")
        lines.append(f"  {'step':>4} {'rank':>4}  {'CPU loss':>14} {'NPU loss':>14}  {'CPU grad norm':>14} "
                     f"{'NPU grad norm':>14}  params")
        for row in report["steps"]:
            cpu, npu = row["cpu"] or {}, row["npu"] or {}
            cl = cpu.get("unscaled_losses") or cpu.get("losses") or [None]
            nl = npu.get("unscaled_losses") or npu.get("losses") or [None]
            same = "=" if cpu.get("digest") and cpu.get("digest") == npu.get("digest") else "≠"
            if same == "≠" and not exact and not any("parameters" in what for what in row["diverged"]):
                same = "≈"  # within the autocast bounds
            mark = "  <- " + row["diverged"][0] if row["diverged"] else ""
            lines.append(f"  {row['step']:>4} {row['rank']:>4}  {_num(cl[-1]):>14} {_num(nl[-1]):>14}  "
                         f"{_num(cpu.get('grad_norm')):>14} {_num(npu.get('grad_norm')):>14}  {same:>6}{mark}")
    m = report.get("metrics", {})
    for key in ("loss", "grad_norm"):
        if m.get(key, {}).get("max_abs_err") is not None:
            x = m[key]
            lines.append(f"  {key}: max abs err {x['max_abs_err']:.3g}, max rel err {x['max_rel_err']:.3g}, "
                         f"cosine {x['cosine']:.8f}, within 1/1000 {x['one_thousandth']:.1%}, "
                         f"within 5/1000 {x['five_thousandths']:.1%}")
    resume = report.get("resume", {})
    lines.append("")
    lines.append(f"  resume round-trip: {resume.get('status', 'not-tried')}")
    for detail in resume.get("detail", []):
        lines.append(f"    {detail}")
    for name, twin in report.get("twins", {}).items():
        if twin.get("error"):
            lines.append(f"  {name} twin: {twin['error']}")
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> str | None:
    """Both loss curves (rank 0, last loss of each step) and their difference."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'npu-migrate[emulate]'): no plot"
    rows = [r for r in report["steps"] if r["rank"] == 0]
    steps, cpu, npu = [], [], []
    for row in rows:
        c = (row["cpu"] or {}).get("unscaled_losses") or (row["cpu"] or {}).get("losses") or [None]
        n = (row["npu"] or {}).get("unscaled_losses") or (row["npu"] or {}).get("losses") or [None]
        steps.append(row["step"])
        cpu.append(c[-1] if isinstance(c[-1], float) else math.nan)
        npu.append(n[-1] if isinstance(n[-1], float) else math.nan)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.plot(steps, cpu, "o-", label="CPU twin (reference)")
    top.plot(steps, npu, "x--", label=f"migrated twin ({report['device']})")
    top.set_ylabel("loss (unscaled)" if any((r["cpu"] or {}).get("unscaled_losses") != (r["cpu"] or {}).get("losses")
                                            for r in rows) else "loss")
    top.set_title(f"npu-migrate verify: {report['verdict']}")
    top.legend()
    bottom.plot(steps, [n - c for n, c in zip(npu, cpu)], "o-", color="tab:red")
    bottom.axhline(0.0, color="grey", linewidth=0.5)
    bottom.set_ylabel("migrated - reference")
    bottom.set_xlabel("optimizer step")
    bottom.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    first = report.get("first_divergence")
    if first:
        for axis in (top, bottom):
            axis.axvline(first["step"], color="tab:red", linestyle=":", linewidth=1)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


def write(report: dict, json_path: Path) -> list[Path]:
    """The JSON at ``json_path``, the summary (``.txt``) and the plot (``.png``) next to it."""
    json_path = Path(json_path)
    txt, png = json_path.with_suffix(".txt"), json_path.with_suffix(".png")
    report = dict(report, files={"summary": str(txt), "plot": str(png)})
    problem = plot(report, png)
    if problem:
        report["files"]["plot"] = None
        report["plot_error"] = problem
    _atomic_write(json_path, (json.dumps(_clean(report), indent=2) + "\n").encode())
    _atomic_write(txt, summary(report).encode())
    return [json_path, txt] + ([png] if not problem else [])
