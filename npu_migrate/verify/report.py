"""The verify report: JSON, a readable text summary, and a PNG of both loss curves."""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
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


def _not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a link: the rename
    that writes the report would replace it (as root, ``--report /dev/full`` replaced the
    device node with a JSON file, and a FIFO with a regular file)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    return "a directory" if stat.S_ISDIR(mode) else "a device, FIFO or socket"


def unwritable(json_path: Path) -> str | None:
    """Why the report (JSON, .txt, .png) cannot be written at ``json_path``, or None."""
    from npu_migrate.reporting.printable import printable

    json_path = Path(json_path)
    for path in (json_path, json_path.with_suffix(".txt"), json_path.with_suffix(".png")):
        what = _not_regular(path)
        if what:
            return f"{printable(str(path))}: {what}, not a file verify may replace"
    parent = json_path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{json_path.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"{printable(str(json_path))}: cannot write there: {exc.strerror or exc}"
    return None


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    what = _not_regular(path)
    if what:
        raise OSError(f"{path}: {what}, not replaced")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _num(value) -> str:
    return "-" if value is None else (f"{value:.8g}" if isinstance(value, float) else str(value))


#: What the last column of the step table says (printed under the table).
LEGEND = (
    ("  params: '=' bit-identical parameters after the step; '≈' not identical, within the precision's bounds; "
     "'≠' outside them;"),
    ("          'missing' a twin never reached the step (it crashed or stopped earlier); 'skipped' the GradScaler "
     "found inf/NaN gradients"),
    ("          and skipped the optimizer step in both twins (no gradient norm, the scale backs off: normal in the "
     "first fp16 steps)."),
    ("  losses are as the script computed them (a GradScaler's scaled loss divided by its scale); grad norm is the "
     "global norm"),
    ("  of the gradients at the optimizer step (after any clipping); 'clip' the norm clip_grad_norm_ measured "
     "before clipping; '-' no value."),
)


def _params_mark(row: dict, exact: bool) -> str:
    ref, got = row.get("reference"), row.get("migrated")
    if ref is None or got is None:
        return "missing"
    if ref.get("skipped") and got.get("skipped"):
        return "skipped"
    if ref.get("digest") and ref.get("digest") == got.get("digest"):
        return "="
    if exact or any("parameters" in what for what in row["diverged"]):
        return "≠"
    return "≈"


def _paths_lines(report: dict) -> list[str]:
    paths = report.get("paths") or {}
    ref, got = paths.get("reference") or {}, paths.get("migrated") or {}
    if not ref and not got:
        return []
    lines = ["", "  code paths (rank 0)            reference twin / migrated twin"]
    r0, g0 = ref.get("0", {}), got.get("0", {})

    def show(value) -> str:
        if value in (None, [], {}):
            return "none"
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return "; ".join(", ".join(f"{k}={v}" for k, v in item.items()) for item in value)
        if isinstance(value, list) and value and isinstance(value[0], list):
            return ", ".join(f"{e[0]} {e[1]}" for e in value)
        if isinstance(value, dict):
            return ", ".join(f"{k}={v}" for k, v in value.items())
        if isinstance(value, list):  # repeats in a row once, counted: FSDP2's fully_shard per layer
            runs: list[list] = []
            for item in value:
                if runs and runs[-1][0] == item:
                    runs[-1][1] += 1
                else:
                    runs.append([item, 1])
            return ", ".join(f"{item} ×{count}" if count > 1 else str(item) for item, count in runs)
        return str(value)

    for key, label in (("devices", "device types"), ("autocast", "autocast"), ("dataloaders", "DataLoaders"),
                       ("process_group", "process group"), ("wrappers", "DDP/FSDP"),
                       ("collectives", "collectives"), ("attention", "attention kernels")):
        if key == "attention":
            a, b = (("; ".join("+".join(entry) for entry in (side.get(key) or [])) or "any") for side in (r0, g0))
        else:
            a, b = show(r0.get(key)), show(g0.get(key))
        mark = "" if a == b else ("   <- differ (a kernel choice: compared within the bounds above)"
                                  if key == "attention" else "   <- differ")
        lines.append(f"    {label + ':':<26} {a}" + ("" if a == b else f"  /  {b}") + mark)
    return lines


def summary(report: dict) -> str:
    lines = [f"npu-migrate verify {report['script']}: {report['verdict'].upper()}"]
    frame = next((twin.get("frame") for twin in report.get("twins", {}).values() if twin.get("error")
                  and twin.get("frame")), None)
    if frame and report["verdict"] != "pass":
        lines.append(f"  {frame}")
    if report.get("reason"):
        lines.append(f"  {report['reason']}")
    lines.append(f"  migrated twin on {report['device']}; reference: {report.get('reference', 'the reference twin')}; "
                 f"{report['nproc']} process(es), {report['steps_requested']} step(s); "
                 f"precision {report['precision']['mode']}")
    if report.get("steps_counted_by") == "backward":
        lines.append("  steps: counted by backward(): the script updates its parameters by hand (no torch.optim "
                     "optimizer); grad norm is taken when backward() returns (before any clipping), params after "
                     "the script's own update")
    first = report.get("first_divergence")
    if first:
        lines.append(f"  first diverging step: {first['step']} (rank {first['rank']}): " + "; ".join(first["what"]))
    for item in report.get("path_differences", [])[1:]:
        lines.append(f"  also another code path: {item}")
    for item in report.get("silent_cpu", []):
        lines.append(f"  silent CPU work at step {item['step']} (rank {item['rank']}): {item['detail']}")
    exact = report["precision"].get("params") == "bit-exact digests"
    if report.get("steps"):
        clip = any((row.get("reference") or {}).get("grad_norm_clip") is not None for row in report["steps"])
        lines.append("")
        head = (f"  {'step':>4} {'rank':>4}  {'ref loss':>14} {'migrated loss':>14}  {'ref grad norm':>14} "
                f"{'migr grad norm':>14}")
        if clip:
            head += f"  {'ref clip':>12} {'migr clip':>12}"
        lines.append(head + "  params")
        for row in report["steps"]:
            ref, got = row.get("reference") or {}, row.get("migrated") or {}
            rl = ref.get("unscaled_losses") or [None]
            gl = got.get("unscaled_losses") or [None]
            mark = _params_mark(row, exact)
            note = "  <- " + row["diverged"][0] if row["diverged"] else ""
            line = (f"  {row['step']:>4} {row['rank']:>4}  {_num(rl[-1]):>14} {_num(gl[-1]):>14}  "
                    f"{_num(ref.get('grad_norm')):>14} {_num(got.get('grad_norm')):>14}")
            if clip:
                line += f"  {_num(ref.get('grad_norm_clip')):>12} {_num(got.get('grad_norm_clip')):>12}"
            lines.append(f"{line}  {mark:>7}{note}")
        lines.extend(LEGEND)
    m = report.get("metrics", {})
    for key, label in (("loss", "loss (unscaled)"), ("grad_norm", "grad norm")):
        if m.get(key, {}).get("max_abs_err") is not None:
            x = m[key]
            lines.append(f"  {label}: max abs err {x['max_abs_err']:.3g}, max rel err {x['max_rel_err']:.3g}, "
                         f"cosine {x['cosine']:.8f}, within 1/1000 {x['one_thousandth']:.1%}, "
                         f"within 5/1000 {x['five_thousandths']:.1%}")
    lines.extend(_paths_lines(report))
    resume = report.get("resume", {})
    lines.append("")
    lines.append(f"  resume round-trip: {resume.get('status', 'not-tried')}")
    for detail in resume.get("detail", []):
        lines.append(f"    {detail}")
    for name, twin in report.get("twins", {}).items():
        if twin.get("error"):
            where = f" at {twin['frame']}" if twin.get("frame") else ""
            log = (report.get("logs") or {}).get(f"{name} twin")
            lines.append(f"  {name} twin{where}: {twin['error']}" + (f" (log: {log})" if log else ""))
    return "\n".join(lines) + "\n"


def _import_pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


def preload() -> None:
    """Import matplotlib in a background thread (about 0.8 s of CPU, 1-3 s of wall on a
    loaded machine) while verify waits for the round-trip's runs, so that :func:`plot`
    does not start with it; :func:`plot` imports it itself where this did not finish."""
    import threading

    def load():
        with contextlib.suppress(Exception):  # plot() reports a missing matplotlib itself
            _import_pyplot()

    threading.Thread(target=load, name="verify-preload-matplotlib", daemon=True).start()


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
        c = (row["reference"] or {}).get("unscaled_losses") or [None]
        n = (row["migrated"] or {}).get("unscaled_losses") or [None]
        steps.append(row["step"])
        cpu.append(c[-1] if isinstance(c[-1], float) else math.nan)
        npu.append(n[-1] if isinstance(n[-1], float) else math.nan)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.plot(steps, cpu, "o-", label="reference twin (the original)")
    top.plot(steps, npu, "x--", label=f"migrated twin ({report['device']})")
    top.set_ylabel("loss (unscaled)" if any((r["reference"] or {}).get("unscaled_losses")
                                            != (r["reference"] or {}).get("losses") for r in rows) else "loss")
    top.set_title(f"npu-migrate verify: {report['verdict']}")
    top.legend()
    bottom.plot(steps, [n - c for n, c in zip(npu, cpu)], "o-", color="tab:red")
    bottom.axhline(0.0, color="grey", linewidth=0.5)
    bottom.set_ylabel("migrated - reference")
    bottom.set_xlabel("step (a backward())" if report.get("steps_counted_by") == "backward" else "optimizer step")
    bottom.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    first = report.get("first_divergence")
    if first:
        for axis in (top, bottom):
            axis.axvline(first["step"], color="tab:red", linestyle=":", linewidth=1)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    what = _not_regular(path)
    if what:  # savefig opens it: a FIFO would block, a device be written
        plt.close(fig)
        return f"{path}: {what}, not replaced"
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
