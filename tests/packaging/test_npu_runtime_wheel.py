"""npu-runtime on its own: build its wheel, install it into a fresh virtual environment
that has torch and nothing of npu-migrate (no libcst, click, rich, pathspec), check what
the wheel declares, and run the runtime tests against that installation.

This is the training image's situation (``pip install npu-runtime`` next to torch and
torch_npu). The main suite already runs every runtime test against the source tree
(tests/runtime); here only what can differ in the installed wheel is run: every module
imports with torch alone, the console script works, and a handful of tests whose child
processes start the *installed* package (install(), the watchdog's kill, a SIGKILL and
exact resume, spawned workers, the health stop, the preflight without torch). Re-running
all 300 runtime tests here doubled their cost (about two minutes) for nothing a wheel
can break that these do not. It costs a fresh venv, torch from the configured package
sources (the CPU wheel is on disk), the test tools, then those tests.
"""

import email.parser
import importlib.metadata
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
RUNTIME_TESTS = REPO / "tests" / "runtime"
ENGINE_ONLY = ["npu_migrate", "libcst", "click", "rich", "pathspec"]
# What runs inside the wheel's venv: the in-process install() wiring and help style, and
# the process tests whose children import the installed npu_runtime (a watchdog kill, a
# SIGKILL-and-resume, spawned workers, a health stop, the preflight with torch blocked).
WHEEL_TESTS = [
    "test_install.py",
    "test_helpstyle.py",
    "test_preflight.py::test_the_real_preflight_on_this_cpu_machine_is_not_ready",
    "test_preflight.py::test_runs_where_torch_cannot_be_imported",
    "test_health.py::test_install_watches_an_unchanged_script_and_stop_exits_76",
    "test_watchdog.py::test_hung_rank_is_killed_with_code_and_stacks[hang-before-first-step]",
    "test_resume_process.py::test_sigkill_and_resume_is_bit_identical[8]",
    "test_children.py::test_spawned_workers_get_their_rank_and_a_watchdog",
]


def _run(cmd, cwd=None, timeout=600):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def _wheel_text(wheel: Path, suffix: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(next(n for n in zf.namelist() if n.endswith(suffix))).decode()


def _pin(dist: str) -> str:
    return f"{dist}=={importlib.metadata.version(dist)}"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_runtime_wheel_installs_and_passes_its_tests_without_npu_migrate(tmp_path):
    # 1. Build the wheel from runtime/ alone (an isolated build, as pip does for users).
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels,
          REPO / "runtime"])
    (wheel,) = wheels.glob("npu_runtime-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    meta = email.parser.Parser().parsestr(_wheel_text(wheel, ".dist-info/METADATA"))
    assert meta["Name"] == "npu-runtime"
    # no hard requirement: torch is the training environment's (runtime/pyproject.toml)
    assert sorted(meta.get_all("Requires-Dist")) == ["numpy; extra == \"numpy\"", "torch>=2.2; extra == \"torch\""]
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"npu_runtime"}, packages
    assert "npu_runtime/preflight/cli.py" in names
    entry_points = _wheel_text(wheel, ".dist-info/entry_points.txt")
    assert "npu-preflight = npu_runtime.preflight.cli:main" in entry_points, entry_points

    # 2. A fresh environment: torch and the test tools, then the wheel (its torch
    #    requirement already satisfied: --no-index proves nothing else is needed).
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    python = env_dir / "bin" / "python"
    tools = [_pin(d) for d in ("pytest", "pytest-timeout", "hypothesis", "numpy")]
    _run([python, "-m", "pip", "install", "-q", f"torch=={torch.__version__.split('+')[0]}", *tools], timeout=900)
    _run([python, "-m", "pip", "install", "-q", "--no-index", wheel])

    # 3. Nothing of the migration engine is there, npu_runtime is the wheel's, and every
    #    one of its modules (the preflight's too) imports with torch alone.
    probe = textwrap.dedent(f"""
        import importlib, importlib.util, pkgutil, npu_runtime
        print(npu_runtime.__file__)
        print([m for m in {ENGINE_ONLY!r} if importlib.util.find_spec(m)])
        modules = [m.name for m in pkgutil.walk_packages(npu_runtime.__path__, "npu_runtime.")]
        for name in modules:
            importlib.import_module(name)
        print(len(modules), "npu_runtime.preflight.cli" in modules)
    """)
    out = _run([python, "-I", "-c", probe], cwd=tmp_path).stdout.splitlines()
    assert out[0].startswith(str(env_dir)) and out[1] == "[]", out
    assert out[2].endswith(" True") and int(out[2].split()[0]) > 15, out
    # The console script the wheel declares runs (the preflight: stdlib only).
    usage = _run([env_dir / "bin" / "npu-preflight", "--help"], cwd=tmp_path).stdout
    assert usage.startswith("Usage: npu-preflight [OPTIONS]"), usage

    # 4. The runtime tests, copied out of the repository, against that installation.
    tests = tmp_path / "runtime_tests"
    shutil.copytree(RUNTIME_TESTS, tests, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pytest.ini").write_text(textwrap.dedent("""
        [pytest]
        addopts = -ra --strict-markers -p no:cacheprovider
        timeout = 900
        timeout_method = thread
        markers =
            slow: runs real training processes
    """))
    report = tmp_path / "junit.xml"
    run = _run([python, "-m", "pytest", "-q", f"--junitxml={report}", *(f"runtime_tests/{t}" for t in WHEEL_TESTS)],
               cwd=tmp_path, timeout=900)
    cases = ElementTree.parse(report).getroot().iter("testcase")
    outcomes = {f"{c.get('classname')}.{c.get('name')}": [e.tag for e in c] for c in cases}
    not_passed = {k: v for k, v in outcomes.items() if set(v) - {"system-out", "system-err"}}
    assert not not_passed, f"{not_passed}\n{run.stdout[-4000:]}"
    # every listed test (and file) was collected and passed: none silently deselected
    for wanted in WHEEL_TESTS:
        module, _, name = wanted.partition("::")
        prefix = f"runtime_tests.{module.removesuffix('.py')}." + name
        assert any(k.startswith(prefix) for k in outcomes), (wanted, sorted(outcomes))
