"""Comparison, tolerances, the resume check and the report, on recorded data (no process)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from npu_migrate.verify import compare, report
from npu_migrate.verify.twins import RunResult


def _step(n, loss=1.0, norm=0.5, digest="d", scale=None, skipped=False, devices=None, loss_device="npu"):
    return {"step": n, "optimizer": 0, "losses": [{"value": loss, "dtype": "float32", "device": loss_device,
                                                   "shape": []}],
            "grad_norm": norm, "digest_before": f"b{n}", "digest_after": digest, "scale": scale,
            "skipped": skipped, "param_devices": devices or {"npu": 4}}


def _run(steps, rank=0, autocast=(), offset=0, status="finished"):
    result = RunResult(name="x", out=Path("/nonexistent"), returncode=0, log="")
    result.ranks[rank] = {"rank": rank, "status": status, "steps": steps, "autocast": list(autocast),
                          "offset": offset, "saves": []}
    return result


def test_metrics_match_msprobe_definitions():
    m = compare.metrics([1.0, 2.0, 3.0015, 0.0], [1.0, 2.0, 3.0, 0.0])
    assert m["max_abs_err"] == pytest.approx(0.0015)
    assert m["max_rel_err"] == pytest.approx(0.0005)
    assert m["one_thousandth"] == 1.0 and m["five_thousandths"] == 1.0
    assert m["cosine"] == pytest.approx(1.0, abs=1e-6)
    m = compare.metrics([1.0, 1.1], [1.0, 1.0])
    assert m["one_thousandth"] == 0.5 and m["max_rel_err"] == pytest.approx(0.1)
    assert compare.metrics([0.0, 1.0], [1.0, 0.0])["cosine"] == 0.0
    assert compare.metrics([math.inf], [math.inf])["max_abs_err"] == 0.0


def test_fp32_is_bit_exact():
    ref = _run([_step(1), _step(2, loss=0.9)])
    same = _run([_step(1), _step(2, loss=0.9)])
    tol = compare.precision(ref, same)
    assert tol.exact and tol.name == "fp32"
    rows, first, _ = compare.compare_runs(ref, same, tol)
    assert first is None and len(rows) == 2
    off = _run([_step(1), _step(2, loss=0.9 + 1e-7)])
    _, first, _ = compare.compare_runs(ref, off, tol)
    assert first["step"] == 2 and first["what"][0].startswith("loss")
    digest = _run([_step(1, digest="other"), _step(2, loss=0.9)])
    _, first, _ = compare.compare_runs(ref, digest, tol)
    assert first["step"] == 1 and "parameters" in first["what"][0]


def test_autocast_precision_and_bounds():
    ref = _run([_step(1, loss=2.0, norm=1.0, digest="a")], autocast=[["cpu", "float16", True]])
    near = _run([_step(1, loss=2.01, norm=1.01, digest="b")], autocast=[["npu", "float16", True]])
    tol = compare.precision(ref, near)
    assert tol.name == "fp16 autocast" and not tol.exact
    assert compare.compare_runs(ref, near, tol)[1] is None
    far = _run([_step(1, loss=2.1, norm=1.0, digest="b")])
    assert compare.compare_runs(ref, far, tol)[1]["what"][0].startswith("loss")
    bf = _run([_step(1)], autocast=[["npu", "bfloat16", True]])
    assert compare.precision(ref, bf).name == "bf16 autocast"
    disabled = _run([_step(1)], autocast=[["npu", "float16", False]])
    assert compare.precision(disabled, _run([_step(1)])).exact


def test_scaler_and_missing_steps_diverge():
    tol = compare.TOLERANCES["fp32"]
    ref = _run([_step(1, scale=32.0), _step(2, scale=64.0)])
    got = _run([_step(1, scale=32.0), _step(2, scale=16.0)])
    assert "scale" in compare.compare_runs(ref, got, tol)[1]["what"][0]
    short = _run([_step(1, scale=32.0)])
    first = compare.compare_runs(ref, short, tol)[1]
    assert first["step"] == 2 and first["what"][0].startswith("missing")


def test_silent_cpu_is_reported():
    assert compare.silent_cpu(_run([_step(1), _step(2)])) == []
    found = compare.silent_cpu(_run([_step(1), _step(2, devices={"cpu": 4}, loss_device="cpu")]))
    assert found[0]["step"] == 2 and "4 of 4 parameters" in found[0]["detail"]


def test_own_resume_statuses():
    full = _run([_step(1, digest="a"), _step(2, digest="b"), _step(3, digest="c"), _step(4, digest="d")])
    good = _run([_step(3, digest="c"), _step(4, digest="d")], offset=2)
    assert compare.own_resume(full, good)["status"] == "exact"
    bad = _run([_step(3, digest="c"), _step(4, digest="x")], offset=2)
    result = compare.own_resume(full, bad)
    assert result["status"] == "not-exact" and result["first_divergence"]["step"] == 4
    assert compare.own_resume(full, _run([_step(1)], offset=0))["status"] == "no-resume-path"
    unaligned = _run([_step(3)], offset=2)
    unaligned.ranks[0]["aligned"] = False
    assert "match no step" in compare.own_resume(full, unaligned)["detail"]
    tracker = compare.compare_steps(_step(3, scale=8.0) | {"growth_tracker": 3}, _step(3, scale=8.0) | {"growth_tracker": 1},
                                    compare.TOLERANCES["fp32"])
    assert tracker and "growth tracker" in tracker[0]


def test_what_lets_the_round_trip_leave_out_the_reference_restart():
    # The reference's restart is left out only for bit-identical twins and a migrated
    # restart that resumed after step k and repeats every later step bit for bit.
    def full(digests="abcd"):
        return _run([_step(n, digest=d) for n, d in zip((1, 2, 3, 4), digests)])

    assert compare.identical_runs(full(), full())
    assert not compare.identical_runs(full(), full("abcx"))  # one digest differs
    shorter = _run([_step(n, digest=d) for n, d in zip((1, 2, 3), "abc")])
    assert not compare.identical_runs(full(), shorter) and not compare.identical_runs(_run([]), _run([]))
    before = full()
    before.ranks[0]["steps"][0]["digest_before"] = "other"  # another initialisation
    assert not compare.identical_runs(full(), before)
    near = full()
    near.ranks[0]["steps"][2]["losses"][0]["value"] = 1.0 + 1e-12  # within any bound, but not equal
    assert not compare.identical_runs(full(), near)

    assert compare.repeats_uninterrupted(full(), _run([_step(3, digest="c"), _step(4, digest="d")], offset=2),
                                         2) == "exact"
    assert not compare.repeats_uninterrupted(full(), _run([_step(3, digest="c"), _step(4, digest="x")], offset=2), 2)
    assert not compare.repeats_uninterrupted(full(), _run([_step(4, digest="d")], offset=3), 2)  # resumed elsewhere
    assert not compare.repeats_uninterrupted(full(), _run([_step(3, digest="c")], offset=2), 2)  # stopped short
    assert not compare.repeats_uninterrupted(full(), _run([_step(n, digest=d) for n, d in zip((1, 2, 3, 4), "abcd")]),
                                       2)  # began again: no resume path
    unaligned = _run([_step(3, digest="c"), _step(4, digest="d")], offset=2)
    unaligned.ranks[0]["aligned"] = False
    assert not compare.repeats_uninterrupted(full(), unaligned, 2)
    # parameters that never change (a loss of 0: pytorch/examples' DDP tutorial): where the
    # restart began cannot be told; it repeats the run only if every step is the same
    still = _run([_step(n, loss=0.0, norm=0.0, digest="s") | {"digest_before": "s"} for n in (1, 2, 3)])
    again = _run([_step(n, loss=0.0, norm=0.0, digest="s") | {"digest_before": "s"} for n in (1, 2, 3)])
    assert compare.repeats_uninterrupted(still, again, 2) == "not-measurable"
    again.ranks[0]["steps"][1]["losses"][0]["value"] = 0.5
    assert compare.repeats_uninterrupted(still, again, 2) is None
    short = _run([_step(n, loss=0.0, norm=0.0, digest="s") | {"digest_before": "s"} for n in (1, 2)])
    assert compare.repeats_uninterrupted(still, short, 2) is None


def test_report_files(tmp_path):
    ref = _run([_step(1, loss=1.0), _step(2, loss=0.5)])
    got = _run([_step(1, loss=1.0), _step(2, loss=0.75)])
    rows, first, metrics = compare.compare_runs(ref, got, compare.TOLERANCES["fp32"])
    data = {"script": "train.py", "verdict": "fail", "reason": "x", "device": "the emulated NPU", "nproc": 1,
            "steps_requested": 2, "precision": compare.TOLERANCES["fp32"].as_dict(), "first_divergence": first,
            "steps": rows, "metrics": metrics, "resume": {"status": "not-tried"}, "silent_cpu": [],
            "nan": math.nan}
    written = report.write(data, tmp_path / "out" / "verify.json")
    assert [p.name for p in written] == ["verify.json", "verify.txt", "verify.png"]
    loaded = json.loads((tmp_path / "out" / "verify.json").read_text())  # strict JSON: no NaN
    assert loaded["nan"] == "nan" and loaded["first_divergence"]["step"] == 2
    assert (tmp_path / "out" / "verify.png").read_bytes()[:4] == b"\x89PNG"
    assert "first diverging step: 2" in (tmp_path / "out" / "verify.txt").read_text()


def _scaled(n, loss, scale, **kw):
    step = _step(n, loss=loss * scale, scale=scale, **kw)
    step["losses"][0]["unscaled"] = loss
    return step


def test_figures_are_on_unscaled_losses():
    # a GradScaler's output is loss * 65536: a 1e-6 difference of the loss must not read as 0.07
    ref = _run([_scaled(1, 1.0, 65536.0)])
    got = _run([_scaled(1, 1.000001, 65536.0)])
    rows, _, metrics = compare.compare_runs(ref, got, compare.TOLERANCES["fp16"])
    assert metrics["loss"]["max_abs_err"] == pytest.approx(1e-6)
    assert rows[0]["reference"]["unscaled_losses"] == [1.0]
    text = report.summary({"script": "t.py", "verdict": "pass", "device": "d", "nproc": 1, "steps_requested": 1,
                           "precision": compare.TOLERANCES["fp16"].as_dict(), "steps": rows, "metrics": metrics})
    assert "loss (unscaled): max abs err 1e-06" in text


def test_summary_marks_missing_and_skipped_steps_and_explains_the_symbols():
    tol = compare.TOLERANCES["fp16"]
    ref = _run([_step(1, skipped=True, digest="a"), _step(2, digest="b"), _step(3, digest="c")])
    got = _run([_step(1, skipped=True, digest="a"), _step(2, digest="b2")])
    rows, first, metrics = compare.compare_runs(ref, got, tol)
    text = report.summary({"script": "t.py", "verdict": "fail", "device": "d", "nproc": 1, "steps_requested": 3,
                           "precision": tol.as_dict(), "steps": rows, "metrics": metrics, "first_divergence": first})
    table = {line.split()[0]: line for line in text.splitlines() if line[:6].strip().isdigit()}
    assert "skipped" in table["1"] and "≈" in table["2"]
    assert "missing" in table["3"] and "≈" not in table["3"]
    assert "'≈' not identical, within the precision's bounds" in text and "'missing' a twin never reached" in text


def test_code_paths_differ_first():
    ref = _run([_step(1) | {"autocast": [["npu", "float16", True]]}])
    got = _run([_step(1, loss=1.5) | {"autocast": []}])
    what = compare.compare_steps(ref.ranks[0]["steps"][0], got.ranks[0]["steps"][0], compare.TOLERANCES["fp32"])
    assert what[0].startswith("autocast") and any(w.startswith("loss") for w in what)
    ref.ranks[0]["paths"] = {"dataloaders": [{"shuffle": True, "num_workers": 1}], "process_group": None,
                             "collectives": {}, "wrappers": []}
    got.ranks[0]["paths"] = {"dataloaders": [{"shuffle": False, "num_workers": 0}], "process_group": None,
                             "collectives": {}, "wrappers": []}
    diffs = compare.path_differences(ref, got)
    assert diffs[0].startswith("rank 0: DataLoader settings: migrated shuffle=False")


def test_silent_cpu_against_the_reference():
    cpu_both = _run([_step(1, devices={"cpu": 4}, loss_device="cpu")])
    assert compare.silent_cpu(cpu_both, cpu_both) == []  # the original keeps it on the CPU too
    assert compare.silent_cpu(cpu_both, _run([_step(1)]))[0]["step"] == 1


def test_a_restore_the_original_loses_is_not_a_resume_failure():
    full = _run([_step(3, scale=8.0) | {"growth_tracker": 3}])
    restarted = _run([_step(3, scale=8.0) | {"growth_tracker": 3}], offset=2)
    ref_restarted = _run([_step(3, scale=8.0) | {"growth_tracker": 1}], offset=2)
    rows, _, _ = compare.compare_runs(ref_restarted, restarted, compare.TOLERANCES["fp32"])
    first, notes = compare.restores_more(rows, full, restarted)
    assert first is None and "restores what the original's restart loses" in notes[0]
    worse = _run([_step(3, scale=8.0, digest="x") | {"growth_tracker": 1}], offset=2)
    rows, _, _ = compare.compare_runs(ref_restarted, worse, compare.TOLERANCES["fp32"])
    assert compare.restores_more(rows, full, worse)[0]["step"] == 3


def test_crash_reason_is_one_line_at_the_users_frame(tmp_path, monkeypatch):
    import importlib.util

    from npu_migrate.verify import hook

    script = tmp_path / "train_crash.py"
    script.write_text("def main():\n    raise NotImplementedError('no kernel for npu\\nbackends: CPU, CUDA, ...')\n")
    monkeypatch.setenv(hook.ENV_ROOT, str(tmp_path))
    spec = importlib.util.spec_from_file_location("train_crash", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(NotImplementedError) as info:
        module.main()
    assert hook.reason_line(info.value) == "NotImplementedError: no kernel for npu"
    assert hook.user_frame(info.value) == ("train_crash.py:2 raise NotImplementedError('no kernel for npu\\n"
                                           "backends: CPU, CUDA, ...')")


def test_cuda_device_arguments_name_the_npu():
    torch = pytest.importorskip("torch")
    from npu_migrate.verify.cuda_on_npu import map_device

    assert map_device("cuda:1") == "npu:1" and map_device("cpu") == "cpu"
    assert map_device(torch.device("cuda", 0)) == torch.device("npu", 0) if hasattr(torch, "npu") else True
    assert map_device({"cuda:0": "cuda:1"}) == {"npu:0": "npu:1"}


def test_a_dispatcher_error_is_cut_to_its_first_sentence():
    from npu_migrate.verify import hook

    exc = NotImplementedError("Could not run 'aten::batch_norm_stats' with arguments from the 'CPU' backend. "
                              "This could be because the operator doesn't exist for this backend, or was omitted "
                              "during the selective/custom build process. 'aten::batch_norm_stats' is only "
                              "available for these backends: [PrivateUse1, Meta, BackendSelect, Python, ...].")
    assert hook.reason_line(exc) == ("NotImplementedError: Could not run 'aten::batch_norm_stats' with arguments "
                                     "from the 'CPU' backend.")


def test_terminal_escapes_are_left_out_of_the_reason():
    # torch.load's weights-only refusal (torch >= 2.6) prints part of its message in bold:
    # facebookresearch/dino's restart from its own checkpoint put ESC[1m ... ESC[0m into the report.
    from npu_migrate.verify import hook

    exc = RuntimeError("Weights only load failed. This file can still be loaded, to do so you have two options, "
                       "\x1b[1mdo those steps only if you trust the source of the checkpoint\x1b[0m. \n\t(1) ...")
    assert hook.reason_line(exc) == ("RuntimeError: Weights only load failed. This file can still be loaded, to do "
                                     "so you have two options, do those steps only if you trust the source of the "
                                     "checkpoint.")


def test_a_sharded_parameter_is_recorded_by_its_local_shard():
    torch = pytest.importorskip("torch")
    from npu_migrate.verify import hook

    class Sharded:  # what FSDP2's DTensor offers
        def __init__(self, local):
            self.local = local

        def to_local(self):
            return self.local

    shard = torch.ones(3)
    assert hook._local(Sharded(shard)) is shard and hook._local(shard) is shard


def test_other_attention_kernels_are_a_kernel_choice_compared_within_the_wider_bounds():
    # lucidrains/denoising-diffusion-pytorch: the original picks its sdpa kernels by CUDA
    # compute capability and q.is_cuda; the migration leaves that probe, so the NPU takes
    # the other branch: the same attention with other rounding, not another code path
    paths = {"dataloaders": [], "process_group": None, "collectives": {}, "wrappers": []}
    ref = _run([_step(1, loss=2.0, norm=1.0)], autocast=[["npu", "float16", True]])
    got = _run([_step(1, loss=2.0 + 1e-5, norm=1.0)], autocast=[["npu", "float16", True]])
    ref.ranks[0]["paths"] = dict(paths, attention=[["EFFICIENT_ATTENTION", "MATH"]])
    got.ranks[0]["paths"] = dict(paths, attention=[["EFFICIENT_ATTENTION", "FLASH_ATTENTION", "MATH"]])
    assert compare.attention_differences(ref, got) == [
        "rank 0: attention kernels (sdpa_kernel): migrated EFFICIENT_ATTENTION+FLASH_ATTENTION+MATH, "
        "reference EFFICIENT_ATTENTION+MATH"]
    assert compare.attention_differences(ref, ref) == []
    assert compare.path_differences(ref, got) == []
    assert compare.precision(ref, got, same_device=True).exact  # the same kernels: bit for bit
    tol = compare.precision(ref, got, same_device=True, other_kernels=True)
    assert tol.name == "fp16 autocast, other attention kernels" and not tol.exact
    assert tol.loss_rtol == compare.TOLERANCES["fp16"].loss_rtol
    fp32 = compare.precision(_run([_step(1)]), _run([_step(1)]), same_device=True, other_kernels=True)
    assert fp32.name == "fp32, other attention kernels" and fp32.loss_rtol == compare.TOLERANCES["fp32-npu"].loss_rtol


def test_matplotlib_preloaded_in_the_background_still_gives_the_plot(tmp_path):
    # verify starts the import while the round-trip runs (report.preload); the plot then
    # finds it loaded, or imports it itself
    import threading

    from npu_migrate.verify import report

    report.preload()
    loading = [t for t in threading.enumerate() if t.name == "verify-preload-matplotlib"]
    for thread in loading:
        thread.join(timeout=60)
    data = {"script": "train.py", "verdict": "pass", "device": "the emulated NPU", "nproc": 1, "steps_requested": 1,
            "precision": {"mode": "fp32"}, "steps_counted_by": "backward",
            "steps": [{"step": 1, "rank": 0, "diverged": [], "reference": {"unscaled_losses": [1.0]},
                       "migrated": {"unscaled_losses": [1.0]}}]}
    written = report.write(data, tmp_path / "verify.json")
    assert [p.name for p in written] == ["verify.json", "verify.txt", "verify.png"]
    assert (tmp_path / "verify.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.timeout(30)
def test_the_paths_line_counts_repeated_wrappers():
    """FSDP2 records one ``fully_shard`` per call (per layer, then the root): the report's
    DDP/FSDP line counts them instead of listing each."""
    paths = {"0": {"wrappers": ["fully_shard"] * 4, "devices": ["npu"], "process_group": None}}
    other = {"0": {"wrappers": ["fully_shard"] * 3, "devices": ["npu"], "process_group": None}}
    lines = report._paths_lines({"paths": {"reference": paths, "migrated": other}})
    line = next(line for line in lines if "DDP/FSDP" in line)
    assert line.split(":", 1)[1].split() == ["fully_shard", "×4", "/", "fully_shard", "×3", "<-", "differ"], line
    same = report._paths_lines({"paths": {"reference": {"0": {"wrappers": ["DistributedDataParallel"]}},
                                          "migrated": {"0": {"wrappers": ["DistributedDataParallel"]}}}})
    assert next(line for line in same if "DDP/FSDP" in line).split(":", 1)[1].split() == ["DistributedDataParallel"]
