"""Comparing the twins step by step: tolerances, msprobe's metrics, the verdict.

The metrics are the ones Ascend engineers know from msprobe's accuracy
comparison: maximum absolute error, maximum relative error, cosine similarity,
and the share of elements whose relative error is within one thousandth
(``one_thousandth``) and within five thousandths (``five_thousandths``). The
reference (msprobe's "bench") is the reference twin.

Tolerances per precision (docs/verify.md says how they were chosen):

* on the emulated NPU with the default reference (the original on the same device):
  bit-exact in every precision (:data:`SAME_DEVICE`). Losses, gradient norms and
  parameter digests must be equal: both twins run the same kernels and autocast lists;
* ``fp32`` on a real NPU: relative 1e-3 on losses and gradient norms (not measured
  here: no Ascend hardware);
* ``fp16`` / ``bf16`` autocast with ``--reference cpu-retarget``: the CPU twin autocasts
  with the CPU's op lists, the NPU with the accelerator's, so results differ within the bounds in
  :data:`TOLERANCES`. A GradScaler's scale and its skipped steps must be equal.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    name: str
    loss_rtol: float
    grad_rtol: float
    #: element-wise parameter checks (None: exact digests instead)
    param_cosine: float | None
    param_five_thousandths: float | None
    atol: float = 0.0

    @property
    def exact(self) -> bool:
        return self.param_cosine is None

    def as_dict(self) -> dict:
        return {"mode": self.name, "loss_rtol": self.loss_rtol, "grad_norm_rtol": self.grad_rtol, "atol": self.atol,
                "params": "bit-exact digests" if self.exact else
                {"cosine_min": self.param_cosine, "five_thousandths_min": self.param_five_thousandths}}


TOLERANCES = {
    "fp32": Tolerance("fp32", 0.0, 0.0, None, None),
    "fp32-npu": Tolerance("fp32 (real NPU)", 1e-3, 1e-3, 0.99999, 0.99, atol=1e-6),
    "fp16": Tolerance("fp16 autocast", 1e-2, 2e-2, 0.9999, 0.95, atol=1e-4),
    "bf16": Tolerance("bf16 autocast", 4e-2, 8e-2, 0.999, 0.90, atol=1e-3),
}


#: Both twins on the same emulated device (the default reference: the original source on
#: the emulated NPU): the same kernels and the same autocast op lists, so autocast runs
#: are compared as closely as fp32 ones (docs/verify.md, "Calibration").
SAME_DEVICE = {
    "fp16": Tolerance("fp16 autocast, same device", 0.0, 0.0, None, None),
    "bf16": Tolerance("bf16 autocast, same device", 0.0, 0.0, None, None),
}


def precision(*runs, real_npu: bool = False, same_device: bool = False, other_kernels: bool = False) -> Tolerance:
    """fp32 unless some autocast with a lower precision was entered (in either twin).
    ``same_device``: both twins ran on the emulated NPU (the default reference).
    ``other_kernels``: the twins chose different attention kernels (:func:`attention_differences`),
    so the same device does not mean the same rounding: the bounds are those for another
    device's kernels (the autocast ones, fp32 as on a real NPU)."""
    dtypes = {entry[1] for run in runs for data in run.ranks.values() for entry in data.get("autocast", [])
              if entry[2] and entry[1] in ("float16", "bfloat16")}
    table = dict(TOLERANCES, **SAME_DEVICE) if same_device and not other_kernels else TOLERANCES
    found = table["bf16"] if "bfloat16" in dtypes else table["fp16"] if "float16" in dtypes else None
    if found is None:
        found = TOLERANCES["fp32-npu" if real_npu or other_kernels else "fp32"]
    if other_kernels:
        found = dataclasses.replace(found, name=f"{found.name.split(' (')[0]}, other attention kernels")
    return found


def attention_differences(ref_run, got_run) -> list[str]:
    """Where the twins allowed other scaled-dot-product-attention kernels
    (``torch.nn.attention.sdpa_kernel``), one line per rank: a kernel choice the
    original makes on CUDA (by compute capability, by ``tensor.is_cuda``) and the
    migration leaves to the NPU's other branch. The same attention, other rounding."""
    ref_paths, got_paths = paths_of(ref_run), paths_of(got_run)
    out = []
    for rank in sorted(set(ref_paths) & set(got_paths), key=int):
        ref, got = ref_paths[rank].get("attention") or [], got_paths[rank].get("attention") or []
        if ref != got:
            out.append(f"rank {rank}: attention kernels (sdpa_kernel): migrated {_kernels(got)}, "
                       f"reference {_kernels(ref)}")
    return out


def _kernels(entries) -> str:
    return "; ".join("+".join(entry) for entry in entries) or "any"


def metrics(actual, bench) -> dict:
    """msprobe's metrics of ``actual`` against ``bench`` (sequences or arrays)."""
    import numpy as np

    a = np.asarray(actual, dtype=np.float64).reshape(-1)
    b = np.asarray(bench, dtype=np.float64).reshape(-1)
    if a.shape != b.shape or a.size == 0:
        return {"count": int(min(a.size, b.size)), "comparable": False}
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
    diff[~finite] = np.where(a[~finite] == b[~finite], 0.0, np.inf)
    rel = np.where(diff == 0, 0.0, diff / np.maximum(np.abs(b), np.finfo(np.float64).tiny))
    na, nb = np.linalg.norm(a[finite]), np.linalg.norm(b[finite])
    if na == 0 and nb == 0:
        cosine = 1.0
    elif na == 0 or nb == 0:
        cosine = 0.0
    else:
        cosine = float(np.dot(a[finite], b[finite]) / (na * nb))
    return {
        "count": int(a.size),
        "max_abs_err": float(diff.max()),
        "max_rel_err": float(rel.max()),
        "cosine": cosine,
        "one_thousandth": float(np.mean(rel <= 1e-3)),
        "five_thousandths": float(np.mean(rel <= 5e-3)),
    }


def _close(a: float | None, b: float | None, rtol: float, atol: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if rtol == 0 and atol == 0:
        return a == b
    return abs(a - b) <= atol + rtol * abs(b)


def _unscaled(step: dict) -> list[float]:
    """The step's losses as the script computed them (a GradScaler's output divided by its scale)."""
    return [loss.get("unscaled", loss["value"]) for loss in step["losses"]]


def _autocast(step: dict | None) -> list:
    return sorted(tuple(entry) for entry in (step or {}).get("autocast", []) if entry[2])


def _side(step: dict | None) -> dict | None:
    if step is None:
        return None
    return {"losses": [loss["value"] for loss in step["losses"]],
            "unscaled_losses": _unscaled(step),
            "grad_norm": step["grad_norm"], "grad_norm_clip": step.get("grad_norm_clip"),
            "autocast": [list(e) for e in _autocast(step)], "devices": step.get("devices", []),
            "digest": step["digest_after"], "scale": step["scale"], "growth_tracker": step.get("growth_tracker"),
            "skipped": step["skipped"]}


def compare_steps(ref: dict | None, got: dict | None, tol: Tolerance, params_ok: bool | None = None) -> list[str]:
    """What differs between one step of the reference and of the other side ([] if nothing)."""
    if got is None:
        return ["missing: the migrated twin did not reach this step"]
    if ref is None:
        return ["extra: the reference did not do this step"]
    what = []
    # the code paths first: where they differ, the numbers differ because of them
    if _autocast(ref) != _autocast(got):
        what.append(f"autocast: {_autocast(got) or 'none'} instead of {_autocast(ref) or 'none'}")
    if "devices" in ref and "devices" in got and ref["devices"] != got["devices"]:
        what.append(f"devices: {got['devices']} instead of {ref['devices']}")
    ref_losses, got_losses = _unscaled(ref), _unscaled(got)
    if len(ref_losses) != len(got_losses):
        what.append(f"backward() calls: {len(got_losses)} instead of {len(ref_losses)}")
    elif not all(_close(g, r, tol.loss_rtol, tol.atol) for g, r in zip(got_losses, ref_losses)):
        what.append(f"loss: {got_losses} instead of {ref_losses}")
    if ref["skipped"] != got["skipped"]:
        what.append(f"GradScaler skipped the step: {got['skipped']} instead of {ref['skipped']}")
    if ref["scale"] != got["scale"]:
        what.append(f"GradScaler scale: {got['scale']} instead of {ref['scale']}")
    if ref.get("growth_tracker") != got.get("growth_tracker"):
        what.append(f"GradScaler growth tracker (steps since the scale changed): {got.get('growth_tracker')} "
                    f"instead of {ref.get('growth_tracker')}")
    if not _close(got.get("grad_norm_clip"), ref.get("grad_norm_clip"), tol.grad_rtol, tol.atol):
        what.append(f"gradient norm before clipping: {got.get('grad_norm_clip')!r} instead of "
                    f"{ref.get('grad_norm_clip')!r}")
    if not _close(got["grad_norm"], ref["grad_norm"], tol.grad_rtol, tol.atol):
        what.append(f"gradient norm: {got['grad_norm']!r} instead of {ref['grad_norm']!r}")
    if tol.exact:
        if ref["digest_after"] != got["digest_after"]:
            what.append("parameters after the step (digest differs)")
    elif params_ok is False:
        what.append("parameters after the step (outside the element-wise bounds)")
    return what


def params_within(actual, bench, tol: Tolerance) -> tuple[bool, dict]:
    m = metrics(actual, bench)
    if not m.get("comparable", True):
        return False, m
    return m["cosine"] >= (tol.param_cosine or 1.0) and m["five_thousandths"] >= (tol.param_five_thousandths or 1.0), m


def silent_cpu(run, reference=None, device: str = "npu") -> list[dict]:
    """Steps of the migrated twin with more parameters or losses on the CPU than the
    reference's same step (without a reference: any on the CPU)."""
    found = []
    for rank, data in sorted(run.ranks.items()):
        ref_steps = {s["step"]: s for s in (reference.ranks.get(rank, {}) if reference else {}).get("steps", [])}
        for step in data.get("steps", []):
            on_cpu = step.get("param_devices", {}).get("cpu", 0)
            total = sum(step.get("param_devices", {}).values())
            losses = sum(1 for loss in step["losses"] if loss["device"] == "cpu")
            ref = ref_steps.get(step["step"])
            if ref is not None:
                ref_cpu = ref.get("param_devices", {}).get("cpu", 0)
                ref_losses = sum(1 for loss in ref["losses"] if loss["device"] == "cpu")
                if on_cpu <= ref_cpu and losses <= ref_losses:
                    continue
            if on_cpu or losses:
                found.append({"rank": rank, "step": step["step"],
                              "detail": f"{on_cpu} of {total} parameters and {losses} of {len(step['losses'])} "
                                        f"losses are on the CPU, not on the {device}"})
                break
    return found


def compare_runs(ref_run, got_run, tol: Tolerance) -> tuple[list[dict], dict | None, dict]:
    """Per step and rank: both sides and what diverged; the first divergence; the metrics."""
    rows: list[dict] = []
    first: dict | None = None
    losses_ref, losses_got, norms_ref, norms_got = [], [], [], []
    params_metrics = {}
    for rank in sorted(set(ref_run.ranks) | set(got_run.ranks)):
        ref_steps = ref_run.ranks.get(rank, {}).get("steps", [])
        got_steps = got_run.ranks.get(rank, {}).get("steps", [])
        ref_params, got_params = ref_run.params(rank), got_run.params(rank)
        for i in range(max(len(ref_steps), len(got_steps))):
            ref = ref_steps[i] if i < len(ref_steps) else None
            got = got_steps[i] if i < len(got_steps) else None
            number = (ref or got)["step"]
            params_ok = None
            if not tol.exact and number in ref_params and number in got_params:
                params_ok, m = params_within(got_params[number], ref_params[number], tol)
                params_metrics[f"rank{rank}_step{number}"] = m
            what = compare_steps(ref, got, tol, params_ok)
            rows.append({"step": number, "rank": rank, "reference": _side(ref), "migrated": _side(got),
                         "diverged": what})
            if ref is not None and got is not None:
                for a, b in zip(_unscaled(ref), _unscaled(got)):  # the losses as the script computed them
                    losses_ref.append(a)
                    losses_got.append(b)
                if ref["grad_norm"] is not None and got["grad_norm"] is not None:
                    norms_ref.append(ref["grad_norm"])
                    norms_got.append(got["grad_norm"])
            if what and (first is None or number < first["step"]):
                first = {"step": number, "rank": rank, "what": what}
        common = sorted(set(ref_params) & set(got_params))
        if common:
            last = common[-1]
            params_metrics.setdefault(f"rank{rank}_step{last}", metrics(got_params[last], ref_params[last]))
    rows.sort(key=lambda row: (row["step"], row["rank"]))
    all_metrics = {"loss": metrics(losses_got, losses_ref), "grad_norm": metrics(norms_got, norms_ref),
                   "params": params_metrics}
    return rows, first, all_metrics


def own_resume(full_run, restarted_run) -> dict:
    """One twin's restarted run against its own uninterrupted run (same device, so
    bit-exact where the script's resume is exact): ``exact``, ``not-exact`` (with
    the first step that differs), ``no-resume-path`` (it began again from the
    initial parameters) or ``failed``."""
    exact = TOLERANCES["fp32"]
    result: dict = {"steps": 0}
    for rank, data in sorted(restarted_run.ranks.items()):
        full = {s["step"]: s for s in full_run.ranks.get(rank, {}).get("steps", [])}
        if not data.get("steps"):
            return {"status": "failed", "detail": f"rank {rank}: the restarted run did no step "
                                                  f"({data.get('error') or data.get('status')})"}
        offset = data.get("offset") or 0
        result["restarted_at"] = offset + 1
        if offset == 0 and data.get("aligned", True):
            if len({s["digest_before"] for s in full.values()}) == 1 and len(full) > 1:
                return {"status": "not-measurable", "restarted_at": 1,
                        "detail": "the parameters never change in these steps (a loss of 0?): where the restart "
                                  "began cannot be told"}
            return {"status": "no-resume-path", "restarted_at": 1,
                    "detail": "the restarted run began again from the initial parameters: the script has no "
                              "resume path (or did not find its checkpoint)"}
        if not data.get("aligned", True):
            return {"status": "not-exact", "restarted_at": offset + 1,
                    "detail": f"rank {rank}: the restarted run's parameters match no step of the uninterrupted run "
                              "(the checkpoint does not restore them as they were)"}
        for step in data["steps"]:
            what = compare_steps(full.get(step["step"]), step, exact) if step["step"] in full else ["extra step"]
            if what:
                return {"status": "not-exact", "restarted_at": offset + 1,
                        "first_divergence": {"step": step["step"], "rank": rank, "what": what},
                        "detail": f"rank {rank}: resumed after step {offset}, differs from the uninterrupted run "
                                  f"at step {step['step']}: " + "; ".join(what)}
        result["steps"] = max(result["steps"], len(data["steps"]))
    result.update(status="exact", detail=f"resumed after step {result['restarted_at'] - 1}; every later step is "
                                          "bit-identical to the uninterrupted run")
    return result


def identical_runs(ref_run, got_run) -> bool:
    """Whether two runs recorded the same steps bit for bit: the same ranks, the same
    step numbers, and at every step the same parameter digests before and after, losses,
    gradient norms, GradScaler state, autocast and device types (``compare_steps`` with
    the exact bounds, plus the digest before the step), through the same code paths."""
    exact = TOLERANCES["fp32"]
    if set(ref_run.ranks) != set(got_run.ranks) or not ref_run.ranks:
        return False
    for rank, data in ref_run.ranks.items():
        ref_steps, got_steps = data.get("steps", []), got_run.ranks[rank].get("steps", [])
        if not ref_steps or len(ref_steps) != len(got_steps):
            return False
        for ref, got in zip(ref_steps, got_steps):
            if (ref["step"] != got["step"] or ref.get("digest_before") != got.get("digest_before")
                    or compare_steps(ref, got, exact)):
                return False
    return not path_differences(ref_run, got_run)


def repeats_uninterrupted(full_run, restarted_run, k: int) -> str | None:
    """How a run restarted after step ``k`` repeats its uninterrupted run bit for bit on
    every rank, or None where it does not:

    - ``"exact"``: it resumed right after step k (its parameters found at step k of that
      run), did every later step that run did and no other, bit-identical at each
      (``own_resume``'s ``exact``);
    - ``"not-measurable"``: the uninterrupted run's parameters never change (where the
      restart began cannot be told, ``own_resume``'s ``not-measurable``), and the
      restarted run recorded the same steps under the same numbers, bit-identical at
      each, the digest before each step included."""
    exact = TOLERANCES["fp32"]
    if set(restarted_run.ranks) != set(full_run.ranks) or not restarted_run.ranks:
        return None
    status = own_resume(full_run, restarted_run)["status"]
    for rank, data in restarted_run.ranks.items():
        full, got = full_run.ranks[rank].get("steps", []), data.get("steps", [])
        if not data.get("aligned", True):
            return None
        if status == "exact":
            later = [s["step"] for s in full if s["step"] > k]
            if data.get("offset") != k or not later or [s["step"] for s in got] != later:
                return None  # resumed elsewhere, stopped short, or did other steps
        elif status == "not-measurable":
            if (len({s["digest_before"] for s in full}) != 1 or data.get("offset") not in (0, None)
                    or [s["step"] for s in got] != [s["step"] for s in full]
                    or any(a.get("digest_before") != b.get("digest_before") or compare_steps(a, b, exact)
                           for a, b in zip(full, got))):
                return None
        else:
            return None
    return status


def _quantity(what: str) -> str:
    """``"loss: [..] instead of [..]"`` -> ``"loss"`` (what a divergence is about)."""
    return what.split(":", 1)[0].split(" (", 1)[0].strip()


def restores_more(rows: list[dict], migrated_full, migrated_restarted) -> tuple[dict | None, list[str]]:
    """The restarted twins' rows, where the migrated twin differs from the restarted
    reference only in quantities it carries over the restart exactly as its own
    uninterrupted run does (which matched the reference's uninterrupted run): the
    migration restores state the original's checkpoint loses (NPU401 adds a GradScaler's
    state), which is not a failure. Returns the first real divergence and those notes."""
    exact = TOLERANCES["fp32"]
    first, notes = None, []
    for row in rows:
        if not row["diverged"]:
            continue
        rank = row["rank"]
        full = {s["step"]: s for s in migrated_full.ranks.get(rank, {}).get("steps", [])}
        again = {s["step"]: s for s in migrated_restarted.ranks.get(rank, {}).get("steps", [])}
        own = compare_steps(full.get(row["step"]), again.get(row["step"]), exact) if row["step"] in full else None
        own_keys = {_quantity(w) for w in own} if own is not None else None
        real = [w for w in row["diverged"] if own_keys is None or _quantity(w) in own_keys]
        if real:
            if first is None or row["step"] < first["step"]:
                first = {"step": row["step"], "rank": rank, "what": real}
        else:
            notes.append(f"step {row['step']} rank {rank}: the migrated twin restores what the original's restart "
                         "loses (" + "; ".join(row["diverged"]) + "); it continues as its uninterrupted run does")
    return first, notes


def rename_device(run, old: str, new: str) -> None:
    """The CPU-retarget reference computes on ``cpu`` where the migrated twin uses ``npu``:
    its recorded autocast devices and device types are named as the migrated twin's."""
    for data in run.ranks.values():
        for step in data.get("steps", []):
            step["autocast"] = [[new if e[0] == old else e[0], *e[1:]] for e in step.get("autocast", [])]
            step["devices"] = sorted({new if d == old else d for d in step.get("devices", [])})


def paths_of(run) -> dict:
    """What each rank of a twin did besides computing: the DataLoaders it built, its
    process group's backend, the collectives it called, DDP/FSDP, the autocast contexts
    entered and the device types of its parameters, gradients and losses."""
    out = {}
    for rank, data in sorted(run.ranks.items()):
        paths = dict(data.get("paths") or {})
        steps = data.get("steps", [])
        paths["autocast"] = sorted({tuple(e) for s in steps for e in s.get("autocast", []) if e[2]})
        paths["autocast"] = [list(e) for e in paths["autocast"]]
        paths["devices"] = sorted({d for s in steps for d in s.get("devices", [])})
        out[str(rank)] = paths
    return out


def path_differences(ref_run, got_run) -> list[str]:
    """Where the migrated twin took another code path than the reference (one line each)."""
    ref_paths, got_paths = paths_of(ref_run), paths_of(got_run)
    out = []
    labels = {"dataloaders": "DataLoader settings", "process_group": "process group",
              "collectives": "collectives called", "wrappers": "DDP/FSDP wrappers",
              "autocast": "autocast", "devices": "device types"}
    for rank in sorted(set(ref_paths) & set(got_paths), key=int):
        ref, got = ref_paths[rank], got_paths[rank]
        for key, label in labels.items():
            if key in ref and key in got and ref[key] != got[key]:
                out.append(f"rank {rank}: {label}: migrated {_short(got[key])}, reference {_short(ref[key])}")
    return out


def _short(value) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return "; ".join(", ".join(f"{k}={v}" for k, v in item.items()) for item in value)
    return str(value)
