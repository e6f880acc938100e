"""End-to-end proof of the data-parallel rules (NPU510 nn.DataParallel -> DDP, NPU511
single device -> DDP, opt-in), on the emulated NPU. See docs/e2e.md.

For every script made data parallel (``Script.data_parallel``), besides what
test_training_scripts.py checks for all scripts (migration, negative control, one
emulated process bit for bit against the CPU reference):

* two processes (``emulate --nproc 2``, hccl) end with the same parameters on both
  ranks, equal to one process with the same global batch within
  ``GLOBAL_BATCH_TOLERANCE`` (the CPU reference reading the data in the job's order);
* torchrun with a single process runs it as one process, bit for bit;
* a checkpoint the original writes (its CPU reference, ``module.`` keys and all)
  resumes in the migrated script, in one and in two processes, and one the migrated
  two-process job writes resumes in the original.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import (
    compare_results,
    emulator_cmd,
    emulator_env,
    load_result,
    reference_cmd,
    result_paths,
    run_all,
    torchrun_cmd,
)
from .specs import GLOBAL_BATCH_TOLERANCE, SCRIPTS

pytestmark = pytest.mark.slow

DATA_PARALLEL = [s for s in SCRIPTS if s.data_parallel]
RESUMABLE = [s for s in DATA_PARALLEL if s.data_parallel.resume]


def _ids(specs):
    return [s.name for s in specs]


def _ok(run, what: str) -> None:
    assert run.returncode == 0, f"{what} failed:\n" + run.describe()


def _reference_args(spec, args) -> list[str]:
    return [*args, "--global-order"] if spec.data_parallel.global_order else list(args)


def _global_reference(spec) -> tuple[str, tuple[str, ...], int]:
    """The one-process CPU reference with the job's global batch (shared, see References)."""
    return spec.name, tuple(_reference_args(spec, [])), 1


def _plain_reference(spec) -> tuple[str, tuple[str, ...], int]:
    """The plain one-process CPU reference (the one test_training_scripts compares with)."""
    return spec.name, (), 1


def _rank_results(out: Path, nproc: int) -> list[dict]:
    return [load_result(p) for p in result_paths(out, nproc)]


def check_against_global_batch(spec, ranks: list[dict], reference: dict) -> None:
    """Every rank holds the same parameters (DDP keeps replicas identical); they, and the
    mean of the ranks' per-step losses, equal the one-process run with the global batch."""
    proof = spec.data_parallel
    first = ranks[0]
    for other in ranks[1:]:
        assert other["state_sha256"] == first["state_sha256"], f"{spec.name}: ranks ended with different parameters"
        assert other["first_step"] == first["first_step"] and len(other["losses"]) == len(first["losses"])
    mean_losses = [
        float.hex(sum(float.fromhex(r["losses"][i]) for r in ranks) / len(ranks)) for i in range(len(first["losses"]))
    ]
    merged = dict(first, losses=mean_losses, world_size=reference["world_size"])
    tolerance = GLOBAL_BATCH_TOLERANCE if proof.global_order else None
    if tolerance is None:
        merged["losses"] = first["losses"]  # every rank trained on the same batches
    problems = compare_results(merged, reference, tolerance, frozenset(first["extra"]) - proof.exact_notes)
    for key in sorted(proof.exact_notes):
        for r in ranks:
            if r["extra"].get(key) != reference["extra"].get(key):
                problems.append(f"note {key!r}: rank {r['rank']} {r['extra'].get(key)!r} vs "
                                f"reference {reference['extra'].get(key)!r}")
    assert not problems, f"{spec.name}.py (2 processes) differs from one process with the global batch:\n  " + \
        "\n  ".join(problems)


@pytest.mark.parametrize("spec", DATA_PARALLEL, ids=_ids(DATA_PARALLEL))
def test_migration_makes_it_data_parallel(workspace, spec):
    source = (workspace.migrated / f"{spec.name}.py").read_text(encoding="utf-8")
    called = {ast.unparse(node.func) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)}
    assert not [c for c in called if c.split(".")[-1] == "DataParallel"], "nn.DataParallel left in the code"
    assert "npu_runtime.data_parallel(" in source or "npu_runtime.distribute_model(" in source
    assert "npu_runtime.init_data_parallel()" in source


@pytest.mark.parametrize("spec", DATA_PARALLEL, ids=_ids(DATA_PARALLEL))
def test_two_processes_match_one_process_with_the_global_batch(workspace, references, emulator_build, spec):
    tag = f"dp_{spec.name}"
    mig_out = workspace.root / f"mig2_{tag}.json"
    (mig,), ((ref, ref_out),) = references.run_beside(
        [emulator_cmd(workspace.migrated / f"{spec.name}.py", ["--out", mig_out], 2)], [_global_reference(spec)],
        cwd=workspace.root,
    )
    _ok(ref, "the CPU reference")
    _ok(mig, f"migrated {spec.name}.py with 2 emulated processes")
    check_against_global_batch(spec, _rank_results(mig_out, 2), load_result(ref_out))


@pytest.mark.parametrize("spec", DATA_PARALLEL, ids=_ids(DATA_PARALLEL))
def test_torchrun_with_one_process_is_the_one_process_program(workspace, references, emulator_build, spec):
    """torchrun sets RANK/WORLD_SIZE=1: still no process group, the same bits as the
    CPU reference (and as the plain run in test_training_scripts.py)."""
    tag = f"dp_{spec.name}"
    mig_out = workspace.root / f"mig_tr1_{tag}.json"
    (mig,), ((ref, ref_out),) = references.run_beside(
        [torchrun_cmd(workspace.migrated / f"{spec.name}.py", ["--out", mig_out], 1)], [_plain_reference(spec)],
        cwd=workspace.root, envs=[emulator_env(1)],
    )
    _ok(ref, "the CPU reference")
    _ok(mig, f"migrated {spec.name}.py under torchrun with one process")
    problems = compare_results(load_result(mig_out), load_result(ref_out), spec.tolerance, spec.npu_only_notes)
    assert not problems, f"{spec.name}.py under torchrun --nproc-per-node 1:\n  " + "\n  ".join(problems)


def _args(args, ckpt: Path) -> list[str]:
    return [a.replace("{ckpt}", str(ckpt)) for a in args]


def _stitched(first: dict, second: dict) -> dict:
    assert second["first_step"] == len(first["losses"]) > 0, "the resumed run did not start where the first stopped"
    return dict(second, first_step=first["first_step"], losses=first["losses"] + second["losses"],
                extra={**first["extra"], **second["extra"]})


@pytest.mark.parametrize("spec", RESUMABLE, ids=_ids(RESUMABLE))
def test_a_checkpoint_of_the_original_resumes_in_the_migrated_script(workspace, references, emulator_build, spec):
    """The CPU reference stands in for the CUDA original: it trains one epoch and saves
    (``module.`` keys where the original has them); the migrated script resumes from that
    file, as one process (bit for bit against the uninterrupted reference) and as two
    (against the uninterrupted one-process run with the global batch)."""
    proof = spec.data_parallel
    root, name = workspace.root, spec.name
    ckpt, ckpt_g = root / f"orig_{name}.pt", root / f"orig_global_{name}.pt"
    outs = {k: root / f"resume_{name}_{k}.json" for k in ("stop", "stop_g", "res1", "res2")}
    ref = workspace.reference / f"{name}.py"
    stops, fulls = references.run_beside(
        [reference_cmd(ref, [*_args(proof.stop, ckpt), "--out", outs["stop"]]),
         reference_cmd(ref, _reference_args(spec, [*_args(proof.stop, ckpt_g), "--out", outs["stop_g"]]))],
        [_plain_reference(spec), _global_reference(spec)],
        cwd=root,
    )
    for run in [*stops, *(run for run, _ in fulls)]:
        _ok(run, "the CPU reference")
    outs["full"], outs["full_g"] = (out for _, out in fulls)
    assert ckpt.exists() and ckpt_g.exists()
    script = workspace.migrated / f"{name}.py"
    one, two = run_all(
        emulator_cmd(script, [*_args(proof.resume, ckpt), "--out", outs["res1"]], 1),
        emulator_cmd(script, [*_args(proof.resume, ckpt_g), "--out", outs["res2"]], 2),
        cwd=root,
    )
    _ok(one, f"migrated {name}.py resuming in one process")
    _ok(two, f"migrated {name}.py resuming in two processes")
    stitched = _stitched(load_result(outs["stop"]), load_result(outs["res1"]))
    problems = compare_results(stitched, load_result(outs["full"]), spec.tolerance, spec.npu_only_notes)
    assert not problems, f"{name}.py: resumed from the original's checkpoint, one process:\n  " + "\n  ".join(problems)
    first_g = load_result(outs["stop_g"])
    ranks = [_stitched(first_g, r) for r in _rank_results(outs["res2"], 2)]
    check_against_global_batch(spec, ranks, load_result(outs["full_g"]))


@pytest.mark.parametrize("spec", RESUMABLE, ids=_ids(RESUMABLE))
def test_a_checkpoint_of_the_two_process_job_resumes_in_the_original(workspace, references, emulator_build, spec):
    """And the other way round: the migrated script, two processes on the emulated NPU,
    trains one epoch and saves (one process writes); the original resumes from it."""
    proof = spec.data_parallel
    root, name = workspace.root, spec.name
    ckpt = root / f"migrated_{name}.pt"
    outs = {k: root / f"back_{name}_{k}.json" for k in ("stop", "resume")}
    (stop,), ((full, outs["full"]),) = references.run_beside(
        [emulator_cmd(workspace.migrated / f"{name}.py", [*_args(proof.stop, ckpt), "--out", outs["stop"]], 2)],
        [_global_reference(spec)],
        cwd=root,
    )
    _ok(stop, f"migrated {name}.py saving in two processes")
    _ok(full, "the CPU reference")
    assert ckpt.exists(), f"{name}.py wrote no checkpoint"
    (resume,) = run_all(
        reference_cmd(workspace.reference / f"{name}.py",
                      _reference_args(spec, [*_args(proof.resume, ckpt), "--out", outs["resume"]])),
        cwd=root,
    )
    _ok(resume, "the CPU reference resuming from the migrated job's checkpoint")
    # Epoch 0 from the two ranks, epoch 1 from the one process that resumed: the mean of
    # the ranks' losses is then the global batch's loss throughout.
    second = load_result(outs["resume"])
    stitched = [_stitched(r, dict(second, rank=r["rank"])) for r in _rank_results(outs["stop"], 2)]
    check_against_global_batch(spec, stitched, load_result(outs["full"]))
