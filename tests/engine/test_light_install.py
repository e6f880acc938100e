"""The light install (`pip install npu-migrate`: no torch, no numpy, no npu-runtime): the
commands that need the [emulate] extra say what to install in one line and exit 2, and
diagnose works from the runtime copy npu-migrate bundles (issue 38 item 5). The missing
packages are simulated by a meta-path finder that refuses them, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

BLOCKED = ("torch", "numpy", "npu_runtime", "torch_npu")

RUN = textwrap.dedent("""
    import sys
    BLOCKED = {blocked!r}

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Refuse())
    from npu_migrate.cli.app import main
    sys.argv = ["npu-migrate", *{args!r}]
    main()
""")


def _run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    code = RUN.format(blocked=BLOCKED, args=list(args))
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("command", [["emulate", "train.py"], ["verify", "train.py"],
                                     ["verify", "--nproc", "2", "train.py", "--", "--epochs", "1"]])
def test_emulate_and_verify_without_torch_say_what_to_install(tmp_path, command):
    (tmp_path / "train.py").write_text("import torch\n")
    result = _run(tmp_path, *command)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'npu-migrate[emulate]'" in lines[0] and "torch" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


@pytest.mark.timeout(180)
def test_diagnose_without_npu_runtime_uses_the_bundled_copy(tmp_path):
    (tmp_path / "rank0.log").write_text("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n")
    result = _run(tmp_path, "diagnose", "rank0.log")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "npu-oom" in result.stdout


@pytest.mark.timeout(180)
def test_a_lone_bang_in_gitignore_is_ignored_as_git_does(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("build/\n!\n\\\n")
    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "b.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    result = subprocess.run([sys.executable, "-m", "npu_migrate", "--no-cache", "."], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    assert "a.py" in result.stdout and "b.py" not in result.stdout


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("where", "named"), [
    ("exclude", "pyproject.toml: [tool.npu-migrate] exclude:"),
    ("extend-exclude", "pyproject.toml: [tool.npu-migrate] extend-exclude:"),
    ("--exclude", "--exclude:"),
    ("--extend-exclude", "--extend-exclude:"),
], ids=["exclude", "extend-exclude", "--exclude", "--extend-exclude"])
def test_an_invalid_exclude_pattern_is_one_error_line(tmp_path, where, named):
    """One line naming where the pattern is (the configuration file and its key, or the
    option), exit 2, no traceback."""
    (tmp_path / "a.py").write_text("import torch\n")
    args = [sys.executable, "-m", "npu_migrate", "--no-cache", "."]
    if where.startswith("--"):
        args[3:3] = [where, "!"]
    else:
        (tmp_path / "pyproject.toml").write_text(f'[tool.npu-migrate]\n{where} = ["build/", "!"]\n')
    result = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'!' is not a valid gitignore-style pattern" in lines[0], result.stderr
    assert lines[0].startswith(f"error: {tmp_path / named}" if not where.startswith("--") else f"error: {named}")

HIDE = textwrap.dedent("""
    import sys
    HIDDEN = {hidden!r}

    def hidden(name):
        return any(name == h or name.startswith(h + ".") for h in HIDDEN)

    class Hide:
        # Wraps each finder: a hidden module is not found at all (find_spec answers None,
        # as for a package that was never installed), not refused with an error.
        def __init__(self, finder):
            self.finder = finder

        def find_spec(self, name, path=None, target=None):
            if hidden(name) or not hasattr(self.finder, "find_spec"):
                return None
            return self.finder.find_spec(name, path, target)

    sys.meta_path[:] = [Hide(finder) for finder in sys.meta_path]
    for name in [name for name in sys.modules if hidden(name)]:
        del sys.modules[name]
    from npu_migrate.cli.app import main
    sys.argv = ["npu-migrate", *{args!r}]
    main()
""")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("command", [["diagnose", "rank0.log"], ["preflight", "--help"]], ids=["diagnose", "preflight"])
def test_diagnose_and_preflight_without_any_runtime_copy_say_what_to_install(tmp_path, command):
    """A broken install without the bundled runtime (npu_migrate._runtime) and without
    npu-runtime: one line naming what to install, exit 2, no traceback."""
    (tmp_path / "rank0.log").write_text("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n")
    code = HIDE.format(hidden=(*BLOCKED, "npu_migrate._runtime"), args=command)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"npu-migrate {command[0]}: ") and "pip install npu-runtime" in lines[0]


@pytest.mark.timeout(180)
def test_preflight_without_npu_runtime_runs_from_the_bundled_copy(tmp_path):
    code = HIDE.format(hidden=BLOCKED, args=["preflight", "--help"])
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "npu-migrate preflight" in result.stdout and "Traceback" not in result.stderr


@pytest.mark.timeout(180)
def test_python_m_npu_runtime_diagnose_in_the_light_install_is_one_line(tmp_path):
    """Issue 38 item (c): in the light install (no npu-runtime) `python -m npu_runtime.diagnose`
    is Python's own one line naming the missing package, exit non-zero, no traceback; the
    README points such an install at `npu-migrate diagnose`, which runs the bundled copy."""
    import os

    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(textwrap.dedent("""
        import sys

        class Hide:
            def find_spec(self, name, path=None, target=None):
                return None if name.split(".")[0] != "npu_runtime" else Hide.missing(name)

            @staticmethod
            def missing(name):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, Hide())
    """), encoding="utf-8")
    (tmp_path / "rank0.log").write_text("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "npu_runtime.diagnose", "rank0.log"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, env=env, check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and "npu_runtime" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
