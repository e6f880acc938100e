"""End-to-end: realistic CUDA training scripts (fixtures/e2e/cuda) are migrated with
``npu-migrate --write``, trained on the emulated NPU (one process, and two
processes with backend hccl where the script is distributed) and compared with
hand-written CPU references (fixtures/e2e/cpu). See docs/e2e.md.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from .conftest import (
    E2E,
    REPORT_MODULE,
    compare_results,
    emulator_cmd,
    load_result,
    result_paths,
    run_all,
)
from .specs import BY_NAME, SCRIPTS, KilledResume

pytestmark = pytest.mark.slow

ALL = [s.name for s in SCRIPTS]
DISTRIBUTED = [s.name for s in SCRIPTS if s.distributed]
RESUMABLE = [s.name for s in SCRIPTS if s.resume]
KILLABLE = [s.name for s in SCRIPTS if s.killed]
LOAD_CHECKPOINT = Path(__file__).resolve().parent / "load_checkpoint.py"
_DEVICE_STRING = re.compile(r"^cuda(:\d*)?$")
# What the unmigrated originals die of on the emulator: a CUDA API or the nccl backend.
_CUDA_FAILURE = re.compile(r"Torch not compiled with CUDA enabled|CUDA|cuda|NCCL|nccl")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def cuda_leftovers(source: str) -> list[str]:
    """CUDA-isms still in the code (docstrings and comments do not count)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    # the torch_npu guard's except branch keeps CUDA names on purpose: what they meant
    # before the migration, for the CPU path where torch_npu is absent
    fallback = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) and _imports_torch_npu(t.body)
                for h in t.handlers for n in ast.walk(h)}
    left = []
    for node in ast.walk(tree):
        if id(node) in fallback:
            continue
        if isinstance(node, ast.Attribute) and node.attr in ("cuda", "is_cuda"):
            left.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Import):
            left += [f"line {node.lineno}: import {a.name}" for a in node.names if "cuda" in a.name.split(".")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if "cuda" in module.split(".") or any(a.name == "cuda" for a in node.names):
                left.append(f"line {node.lineno}: from {module} import ...")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if _DEVICE_STRING.match(node.value) or node.value.startswith("cuda:") or node.value == "nccl":
                left.append(f"line {node.lineno}: {node.value!r}")
    return left


def _imports_torch_npu(body: list[ast.stmt]) -> bool:
    return any(isinstance(stmt, ast.Import) and any(a.name == "torch_npu" for a in stmt.names) for stmt in body)


def string_constants(source: str) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_fixture_pairs_are_complete():
    cuda = {p.stem for p in (E2E / "cuda").glob("*.py")}
    cpu = {p.stem for p in (E2E / "cpu").glob("*.py")}
    assert cuda == cpu == set(ALL)
    assert len(ALL) >= 8


def test_migration_succeeds_and_leaves_the_helper_alone(workspace):
    assert workspace.migrate_run.returncode == 0, workspace.migrate_run.describe()
    helper = (workspace.migrated / REPORT_MODULE).read_bytes()
    assert helper == (E2E / REPORT_MODULE).read_bytes(), "npu-migrate changed a file with no CUDA code"
    assert workspace.file_report("e2e_report")["fixes"] == []


@pytest.mark.parametrize("name", ALL)
def test_migrated_text(workspace, name):
    spec = BY_NAME[name]
    entry = workspace.file_report(name)
    assert entry["error"] is None, entry["error"]
    assert entry["changed"], f"npu-migrate left {name}.py unchanged"
    findings = {(f["rule"], f["start"]["line"], f["message"]) for f in entry["findings"]}
    # NPU854 says what to install where no dependency file declares npu-runtime: this
    # workspace is a folder of scripts without one, and the test environment has it.
    allowed = spec.informational | {"NPU854"} | ({spec.rejected_by} if spec.rejected_by else set())
    unexpected = sorted(f for f in findings if f[0] not in allowed)
    assert not unexpected, f"{name}.py: findings that block running it: {unexpected}"
    if spec.rejected_by:
        assert any(f[0] == spec.rejected_by for f in findings), f"{name}.py is not rejected by {spec.rejected_by}"

    source = (workspace.migrated / f"{name}.py").read_text(encoding="utf-8")
    assert cuda_leftovers(source) == [], f"{name}.py still has CUDA code after migration"
    # guarded, so that the script still imports where torch_npu is absent (a CPU machine)
    guard = r"^try:\n    import torch_npu(  # noqa: F401)?\n(    .*\n)*except ModuleNotFoundError:"
    assert re.search(guard, source, re.MULTILINE), "no guarded `import torch_npu`"
    original = (workspace.original / f"{name}.py").read_text(encoding="utf-8")
    if "nccl" in string_constants(original):
        assert "hccl" in string_constants(source)


@pytest.fixture(scope="session")
def negative_runs(workspace, emulator_build) -> dict:
    """Every unmigrated original, run on the emulator, two at a time."""
    runs = {}
    for i in range(0, len(ALL), 2):
        names = ALL[i:i + 2]
        cmds = [emulator_cmd(workspace.original / f"{n}.py", ["--out", workspace.root / f"neg_{n}.json"])
                for n in names]
        runs.update(zip(names, run_all(*cmds, cwd=workspace.original)))
    return runs


@pytest.mark.parametrize("name", ALL)
def test_unmigrated_original_fails_on_the_emulator(workspace, negative_runs, name):
    """Negative control: without migration the emulator must refuse the script,
    because of CUDA, before it writes a result."""
    run = negative_runs[name]
    assert run.returncode != 0, run.describe()
    assert _CUDA_FAILURE.search(run.output), run.describe()
    assert not (workspace.root / f"neg_{name}.json").exists()


def _train_and_compare(workspace, references, name: str, nproc: int) -> None:
    spec = BY_NAME[name]
    tag = f"{name}_np{nproc}"
    mig_out = workspace.root / f"mig_{tag}.json"
    (mig,), ((ref, ref_out),) = references.run_beside(
        [emulator_cmd(workspace.migrated / f"{name}.py", ["--out", mig_out], nproc)], [(name, (), nproc)],
        cwd=workspace.root,
    )
    assert ref.returncode == 0, "the CPU reference itself failed:\n" + ref.describe()
    if spec.rejected_by and mig.returncode != 0:
        # Rejected with a finding (test_migrated_text checks it is reported), and indeed
        # it does not run as migrated. Should it ever run, it must train like the reference.
        return
    assert mig.returncode == 0, f"migrated {name}.py failed on the emulated NPU:\n" + mig.describe()
    for mig_path, ref_path in zip(result_paths(mig_out, nproc), result_paths(ref_out, nproc)):
        problems = compare_results(load_result(mig_path), load_result(ref_path), spec.tolerance, spec.npu_only_notes)
        assert not problems, f"{name}.py ({nproc} process(es), {mig_path.name}) differs from its CPU reference:\n  " + \
            "\n  ".join(problems)


@pytest.mark.parametrize("name", ALL)
def test_single_process_matches_cpu_reference(workspace, references, emulator_build, name):
    _train_and_compare(workspace, references, name, 1)


@pytest.mark.parametrize("name", DISTRIBUTED)
def test_two_process_hccl_matches_gloo_reference(workspace, references, emulator_build, name):
    _train_and_compare(workspace, references, name, 2)


@pytest.mark.parametrize("name", RESUMABLE)
def test_checkpoint_loads_on_npu_n_and_resumes_exactly(workspace, emulator_build, name):
    spec = BY_NAME[name]
    nproc = spec.resume_nproc
    script = workspace.migrated / f"{name}.py"
    ckpt = workspace.root / f"{name}.ckpt.pt"
    full_args, stop_args, resume_args = ([a.replace("{ckpt}", str(ckpt)) for a in args] for args in spec.resume)
    outs = {k: workspace.root / f"resume_{name}_{k}.json" for k in ("full", "stop", "resume")}
    full, stop = run_all(
        emulator_cmd(script, [*full_args, "--out", outs["full"]], nproc),
        emulator_cmd(script, [*stop_args, "--out", outs["stop"]], nproc),
        cwd=workspace.root,
    )
    assert full.returncode == 0, full.describe()
    assert stop.returncode == 0, stop.describe()
    assert ckpt.exists(), f"{name}.py wrote no checkpoint"

    # The saved checkpoint loads onto the last emulated device with the same bits; that
    # check reads a byte copy of it, so it runs beside the resume (which may save again).
    saved = shutil.copyfile(ckpt, ckpt.with_name(f"{ckpt.name}.as_saved"))
    load, resume = run_all(emulator_cmd(LOAD_CHECKPOINT, [saved, 1]),
                           emulator_cmd(script, [*resume_args, "--out", outs["resume"]], nproc),
                           cwd=workspace.root, envs=[{"NPU_MIGRATE_EMULATOR_DEVICES": "2"}, None])
    assert load.returncode == 0, load.describe()
    loaded = json.loads(load.output.strip().splitlines()[-1])
    assert loaded["tensors"] > 0 and loaded["device_count"] == 2
    assert loaded["wrong_device"] == loaded["different"] == loaded["missing"] == [], loaded

    assert resume.returncode == 0, resume.describe()
    for full_path, stop_path, resume_path in zip(*(result_paths(outs[k], nproc) for k in ("full", "stop", "resume"))):
        whole, first, second = load_result(full_path), load_result(stop_path), load_result(resume_path)
        assert second["first_step"] == len(first["losses"]) > 0
        stitched = dict(second, first_step=first["first_step"], losses=first["losses"] + second["losses"])
        problems = compare_results(stitched, whole, None, frozenset(whole["extra"]))
        assert not problems, f"{name}.py: stop + resume differs from the uninterrupted run:\n  " + "\n  ".join(problems)


def _kill_and_resume(scripts: dict[str, Path], killed: KilledResume, root: Path, whole: tuple[Path, Path]):
    """For each tag's script: run the job until it is killed after a save, then resume it;
    next to the kills, the uninterrupted run of ``whole`` (script, output). The runs
    are independent processes (one job folder each), so the kills and the whole run go
    at once, then the resumes: two rounds instead of one process after another.
    Returns ({tag: (killed run, resumed run, result path)}, the whole run)."""
    jobs = {tag: root / f"job_{tag}" for tag in scripts}
    for job in jobs.values():
        job.mkdir()
    whole_script, whole_out = whole
    kill_cmds = [emulator_cmd(scripts[tag], [*(a.replace("{dir}", str(job)) for a in killed.run),
                                             "--out", job / "killed.json"]) for tag, job in jobs.items()]
    whole_cmd = emulator_cmd(whole_script, [*(a.replace("{dir}", str(whole_out.parent)) for a in killed.run),
                                            "--out", whole_out])
    *kills, whole_run = run_all(*kill_cmds, whole_cmd, cwd=root,
                                envs=[{"E2E_KILL_AFTER_SAVE": str(killed.kill_at)}] * len(kill_cmds) + [None])
    resumes = run_all(*(emulator_cmd(scripts[tag], [*(a.replace("{dir}", str(job)) for a in killed.resume),
                                                    "--out", job / "resumed.json"]) for tag, job in jobs.items()),
                      cwd=root)
    return {tag: (kill, resume, job / "resumed.json")
            for (tag, job), kill, resume in zip(jobs.items(), kills, resumes)}, whole_run


def _continues(whole: dict, resumed: dict) -> list[str]:
    """How a resumed run differs from the tail of the uninterrupted run it continues."""
    k = resumed["first_step"]
    problems = []
    if resumed["losses"] != whole["losses"][k:]:
        problems.append("losses after the resume differ from the uninterrupted run")
    if resumed["extra"]["loss_scales"] != whole["extra"]["loss_scales"][k:]:
        problems.append(f"loss scales after the resume differ: {resumed['extra']['loss_scales'][:4]}... vs "
                        f"{whole['extra']['loss_scales'][k:k + 4]}...")
    tail = dict(whole, first_step=k, losses=whole["losses"][k:], extra={})
    problems += compare_results(dict(resumed, extra={}), tail, None)
    return problems


@pytest.mark.parametrize("name", KILLABLE)
def test_killed_after_save_resumes_exactly(workspace, migrated_without_npu401, emulator_build, name):
    """A float16 job killed (SIGKILL) right after it saved a checkpoint, resumed on the
    emulated NPU: loss scale and losses continue the uninterrupted run bit for bit.
    The same job migrated without NPU401 restarts at the initial loss scale."""
    killed = BY_NAME[name].killed
    root = workspace.root
    whole_job = root / f"job_{name}_whole"
    whole_job.mkdir()
    whole_out = whole_job / "whole.json"
    control_tag = f"{name}_without_npu401"
    runs, whole = _kill_and_resume({name: workspace.migrated / f"{name}.py",
                                    control_tag: migrated_without_npu401 / f"{name}.py"},
                                   killed, root, (workspace.migrated / f"{name}.py", whole_out))
    assert whole.returncode == 0, whole.describe()
    whole_result = load_result(whole_out)

    kill, resume, resumed_out = runs[name]
    assert kill.returncode != 0 and f"killed after saving the checkpoint of step {killed.kill_at}" in kill.output, \
        kill.describe()
    assert not (root / f"job_{name}" / "killed.json").exists()
    assert resume.returncode == 0, resume.describe()
    resumed = load_result(resumed_out)
    assert 0 < resumed["first_step"] < len(whole_result["losses"])
    problems = _continues(whole_result, resumed)
    assert not problems, f"{name}.py: kill + resume differs from the uninterrupted run:\n  " + "\n  ".join(problems)

    # control: without the GradScaler state in the checkpoint the resume goes astray
    _, control, control_out = runs[control_tag]
    assert control.returncode == 0, control.describe()
    assert _continues(whole_result, load_result(control_out)), \
        f"{name}.py resumes exactly even without NPU401: the fixture does not exercise the GradScaler state"
