"""Names are data, and no write leaves the project (issue 30).

Hostile names (quotes, ``$( )``, backticks, YAML specials) in every launch option, the
project directory, the entry script's name and its arguments: the launchers are generated,
then run in a sandbox with stub interpreters on PATH, and nothing the names say is
executed; the job specs parse as exactly the documents they should be. Names with
newlines or control characters are refused with one line. A generated path that a
symbolic link leads out of the project is neither shown nor written.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from .volcano_job import job_errors

pytestmark = pytest.mark.timeout(300)

MARK = "PWNED"
DIR = f"p'$(touch {MARK}_dir)`touch {MARK}_dir2`\"; x: [y] #z & {{a: b}}"
OUT = f"l$(touch {MARK}_out)'\"`touch {MARK}_out2`"
ENTRY = f"e$(touch {MARK}_entry)'`touch {MARK}_entry2`.py"
ARG = f"$(touch {MARK}_arg)`touch {MARK}_arg2`'\"; touch {MARK}_arg3 #"
WORKDIR = f"/w $(touch {MARK}_wd)': - {{a: b}} #c"
IMAGE = f"r/x:1 #$(touch {MARK}_img) : - [a] {{b}} &anchor *alias"
ENV_VALUE = f"$(touch {MARK}_env)'\"`touch {MARK}_env2`"
PYTHON = f"python3 $(touch {MARK}_py)"

STUB = """#!/bin/sh
# A stand-in for python3 / torchrun: records its arguments, passes the preflight.
printf '%s\\n' "$0" "$@" >> "$STUB_LOG"
printf '%s\\n' '--' >> "$STUB_LOG"
case "$1 $2" in
  "-c "*) exit 1 ;;
esac
exit 0
"""


@pytest.fixture
def hostile(tmp_path, run_cli):
    project = tmp_path / DIR
    project.mkdir()
    (project / ENTRY).write_text("print('training')\n", encoding="utf-8")
    result = run_cli("launch", ENTRY, "-t", "torchrun,torch-npu-run,ranktable,modelarts,volcano,ascendjob",
                     "--out", OUT, "--workdir", WORKDIR, "--image", IMAGE, "--env", f"EXTRA={ENV_VALUE}",
                     "--write", "--", ARG, cwd=project)
    assert result.exit_code == 0, result.output
    return project, result


def _sandbox(tmp_path: Path) -> dict[str, str]:
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    for name in ("python3", "torchrun", PYTHON.split()[0]):
        (stubs / name).write_text(STUB, encoding="utf-8")
        (stubs / name).chmod(0o755)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(home), "STUB_LOG": str(tmp_path / "stub.log"),
            "NPU_MAX_RESTARTS": "0", "RANK_TABLE_FILE": "/nonexistent/hccl.json", "LANG": "C.UTF-8"}


def _pwned(*roots: Path) -> list[Path]:
    """Files a name's ``touch PWNED_...`` would have created (the names themselves hold the word too)."""
    return [p for root in roots for p in root.rglob(f"{MARK}_*")]


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_hostile_names_never_execute_in_the_launchers(hostile, tmp_path):
    project, result = hostile
    env = _sandbox(tmp_path)
    out = project / OUT
    scripts = ["torchrun.sh", "torch_npu_run.sh", "ranktable.sh", "modelarts.sh"]
    for script in scripts:
        text = (out / script).read_text(encoding="utf-8")
        head = text.split("set -euo pipefail", 1)[0].splitlines()
        assert head and all(line.startswith("#") for line in head), head  # no name ended a comment line
        proc = _run(["bash", str(out / script)], tmp_path, env)
        assert proc.returncode == 0, (script, proc.stderr)
    # The Volcano and AscendJob pods' commands, and the ModelArts boot command, run as the platform runs them.
    [volcano] = list(yaml.safe_load_all((out / "volcano-job.yaml").read_text(encoding="utf-8")))
    container = volcano["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    assert _run(["bash", "-c", container["args"][0]], project, {**env, "VC_TASK_INDEX": "0"}).returncode == 0
    _configmap, ascend = yaml.safe_load_all((out / "ascendjob.yaml").read_text(encoding="utf-8"))
    pod = ascend["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert _run(["bash", "-c", pod["args"][0]], project, {**env, "RANK": "0"}).returncode == 0
    boot = result.stderr.split("ModelArts boot command: ", 1)[1].strip()
    assert _run(["bash", "-c", boot], tmp_path, {**env, "MA_JOB_DIR": str(tmp_path)}).returncode == 0
    assert _pwned(tmp_path, Path.cwd()) == []
    # ... and the names reached the programs verbatim, as single arguments.
    calls = Path(env["STUB_LOG"]).read_text(encoding="utf-8").split("\n--\n")
    entries = [c.splitlines()[1:] for c in calls if ENTRY in c]
    assert len(entries) >= 7, calls  # 2 node launchers, ranktable, ModelArts, 2 pods, the boot command
    for argv in entries:
        assert argv[argv.index(ENTRY) + 1] == ARG, argv


def test_hostile_names_stay_data_in_the_job_specs(hostile):
    project, _ = hostile
    out = project / OUT
    docs = list(yaml.safe_load_all((out / "volcano-job.yaml").read_text(encoding="utf-8")))
    assert len(docs) == 1 and docs[0]["kind"] == "Job"
    assert job_errors(docs[0]) == []
    container = docs[0]["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    assert (container["workingDir"], container["image"]) == (WORKDIR, IMAGE)
    docs = list(yaml.safe_load_all((out / "ascendjob.yaml").read_text(encoding="utf-8")))
    assert [d["kind"] for d in docs] == ["ConfigMap", "AscendJob"]
    pod = docs[1]["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert (pod["workingDir"], pod["image"]) == (WORKDIR, IMAGE)


def test_a_hostile_default_interpreter_is_one_word(tmp_path, run_cli):
    (tmp_path / "train.py").write_text("pass\n", encoding="utf-8")
    assert run_cli("launch", "train.py", "--python", PYTHON, "--write", cwd=tmp_path).exit_code == 0
    env = _sandbox(tmp_path)
    proc = _run(["bash", str(tmp_path / "launch" / "torchrun.sh")], tmp_path, env)
    # "python3 $(touch PWNED_py)" is a program name that does not exist: the launch fails, nothing runs.
    assert proc.returncode != 0 and _pwned(tmp_path) == []


CONTROL = ["\n", "\r", "\x1b", "\u2028", "\x85", "\t"]


@pytest.mark.parametrize("char", CONTROL, ids=[repr(c) for c in CONTROL])
@pytest.mark.parametrize(("option", "value"), [
    ("--out", "a{}b"), ("--workdir", "/w{}x"), ("--image", "r{}- kind: Pod"), ("--env", "X=a{}b"),
    ("--python", "py{}thon"), ("--namespace", "ns{}x"),
])
def test_control_characters_in_a_name_are_refused(tmp_path, run_cli, option, value, char):
    (tmp_path / "train.py").write_text("pass\n", encoding="utf-8")
    result = run_cli("launch", "train.py", "-t", "torchrun,volcano", "--image", "r/x:1", option, value.format(char),
                     "--write", cwd=tmp_path)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and ("control character" in line or "DNS label" in line), line
    assert not (tmp_path / "launch").exists() and not (tmp_path / "a").exists()


def test_a_newline_in_the_entry_name_or_the_project_directory_is_refused(tmp_path, run_cli):
    (tmp_path / "tr\nain.py").write_text("pass\n", encoding="utf-8")
    result = run_cli("launch", "tr\nain.py", "--write", cwd=tmp_path)
    assert result.exit_code == 2 and "control character '\\n'" in result.stderr
    project = tmp_path / "proj\necho pwned"
    project.mkdir()
    (project / "train.py").write_text("pass\n", encoding="utf-8")
    result = run_cli("launch", "train.py", "-t", "modelarts", "--write", cwd=project)  # the boot command names it
    assert result.exit_code == 2 and "the project directory" in result.stderr
    assert not (project / "launch").exists()


# --- symbolic links out of the project ------------------------------------------------------


@pytest.fixture
def victim(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("home") / ".bashrc"  # outside the project (tmp_path)
    path.write_text("SECRET=keep-me\n", encoding="utf-8")
    return path


def test_a_symlinked_launcher_that_leaves_the_project_is_skipped(project, run_cli, victim):
    (project / "launch").mkdir()
    (project / "launch" / "torchrun.sh").symlink_to(os.path.relpath(victim, project / "launch"))
    dry = run_cli("launch", "train.py", "-t", "torchrun,ranktable", cwd=project)
    assert dry.exit_code == 2 and "keep-me" not in dry.stdout + dry.stderr  # not even the diff's "-" side
    result = run_cli("launch", "train.py", "-t", "torchrun,ranktable", "--write", cwd=project)
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "launch/torchrun.sh: a symbolic link leads it outside the project" in errors[0]
    assert "skipped" in errors[0]
    assert victim.read_text(encoding="utf-8") == "SECRET=keep-me\n"
    assert (project / "launch" / "ranktable.sh").is_file()  # the others are still written
    assert run_cli("launch", "train.py", "-t", "torchrun", "--check", cwd=project).exit_code == 2


def test_a_symlinked_output_directory_that_leaves_the_project_is_skipped(project, run_cli, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere")
    (project / "launch").symlink_to(outside)
    result = run_cli("launch", "train.py", "--write", cwd=project)
    assert result.exit_code == 2 and "outside the project" in result.stderr
    assert list(outside.iterdir()) == []


def test_a_symlink_inside_the_project_is_written_through(project, run_cli):
    (project / "scripts").mkdir()
    (project / "launch").mkdir()
    (project / "launch" / "torchrun.sh").symlink_to("../scripts/torchrun.sh")
    result = run_cli("launch", "train.py", "--write", cwd=project)
    assert result.exit_code == 0, result.output
    assert (project / "launch" / "torchrun.sh").is_symlink()
    assert "torchrun" in (project / "scripts" / "torchrun.sh").read_text(encoding="utf-8")


def test_a_fifo_in_place_of_a_launcher_is_refused_not_read(project, run_cli):
    (project / "launch").mkdir()
    os.mkfifo(project / "launch" / "torchrun.sh")  # reading it would block forever
    result = run_cli("launch", "train.py", cwd=project)
    assert result.exit_code == 2 and "launch/torchrun.sh: is not a regular file" in result.stderr
