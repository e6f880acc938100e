"""The published shape, as a user meets it (issue 21):

* both distributions build with ``python -m build`` (sdist, then the wheel from the
  sdist, so the sdist is proven complete); npu-migrate's wheel requires neither torch
  nor npu-runtime, carries its bundled runtime, and installed alone in a fresh venv
  (no torch) migrates the bundled example;
* a "stock image": a fresh venv holding only torch (the CPU wheel torch==2.13.0), the
  emulator's stand-in torch_npu on PYTHONPATH, and what the migrated example declares
  (its requirements-npu.txt, npu-runtime from the locally built wheel through
  ``--find-links``, as from an index): the migrated example trains.

``--no-isolation`` builds with this environment's setuptools (the isolated build
would fetch setuptools again each run). Packages the fresh venvs need come from the
configured package sources, through pip's cache.
"""

import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "cuda_project"
TORCH = "torch==2.13.0"


def _run(cmd, timeout=300, **kwargs):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, check=False,
                          **kwargs)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _build(source: Path, out: Path) -> Path:
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source], timeout=300)
    return out


def _venv(path: Path) -> Path:
    venv.create(path, with_pip=True, system_site_packages=False)
    return path / "bin"


def _installed(bin_dir: Path) -> set[str]:
    listed = _run([bin_dir / "python", "-m", "pip", "list", "--format=freeze"]).stdout
    return {line.split("==")[0].lower() for line in listed.splitlines() if "==" in line}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_npu_migrate_wheel_installs_without_torch_and_migrates_the_example(tmp_path):
    wheels = _build(REPO, tmp_path / "dist")
    (wheel,) = wheels.glob("npu_migrate-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    assert not [r for r in core if "torch" in r or "npu-runtime" in r or "npu_runtime" in r], core
    assert {"npu_migrate/_runtime/__init__.py", "npu_migrate/_runtime/preflight/cli.py",
            "npu_migrate/rules/runtime/npu701_install_runtime.py"} <= names

    bin_dir = _venv(tmp_path / "venv")
    _run([bin_dir / "python", "-m", "pip", "install", "-q", wheel], timeout=500)
    installed = _installed(bin_dir)
    assert "npu-migrate" in installed
    assert not {d for d in installed if d.startswith(("torch", "nvidia", "triton")) or d == "npu-runtime"}, installed

    project = tmp_path / "cuda_project"
    shutil.copytree(EXAMPLE, project)
    dry = _run([bin_dir / "npu-migrate", project, "--no-cache"], cwd=tmp_path)
    # The import is guarded (the CPU path runs where npu-runtime is not installed).
    assert re.search(r"^\+\s*import npu_runtime$", dry.stdout, re.M), dry.stdout[-2000:]
    assert "+npu-runtime==" in dry.stdout, dry.stdout[-2000:]
    assert "npu-runtime: the migrated code imports npu_runtime" in dry.stderr, dry.stderr[-2000:]
    preflight = _run([bin_dir / "npu-migrate", "preflight", "--help"], cwd=tmp_path)
    assert preflight.stdout.startswith("Usage: npu-migrate preflight [OPTIONS]")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_stock_image_with_what_the_migrated_example_declares_trains_it(tmp_path):
    from click.testing import CliRunner

    from npu_migrate.cli import main
    from npu_migrate.emulate import SITE_DIR

    wheels = _build(REPO / "runtime", tmp_path / "dist")
    assert list(wheels.glob("npu_runtime-*.whl"))
    project = tmp_path / "cuda_project"
    shutil.copytree(EXAMPLE, project)
    migrated = CliRunner().invoke(main, [str(project), "--write", "--no-cache", "--quiet"])
    assert migrated.exit_code == 0, migrated.output
    declared = (project / "requirements.txt").read_text()
    assert "npu-runtime==" in declared and "torch-npu==" not in declared, declared  # a CPU machine keeps torch
    ascend = (project / "requirements-npu.txt").read_text()
    assert "-r requirements.txt" in ascend and "torch-npu==" in ascend, ascend

    # The emulated NPU's extension, built (or found in its cache) by this environment.
    _run([sys.executable, "-c", "from npu_migrate.emulate import build; build.build(quiet=True)"], timeout=300)
    # The stand-in torch_npu needs npu_migrate.emulate, and nothing else of npu-migrate.
    stand_in = tmp_path / "stand_in"
    stand_in.mkdir()
    (stand_in / "npu_migrate").symlink_to(REPO / "npu_migrate", target_is_directory=True)
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=f"{SITE_DIR}:{stand_in}", NPU_MIGRATE_EMULATOR="1", NPU_MIGRATE_EMULATOR_DEVICES="1")

    bin_dir = _venv(tmp_path / "stock")
    _run([bin_dir / "python", "-m", "pip", "install", "-q", TORCH], timeout=500, env=env)
    # What the repository declares, as from an index: torch is there, torch-npu is the
    # stand-in (its dist-info is on PYTHONPATH), npu-runtime comes from the built wheel
    # (--find-links), numpy from the package sources.
    _run([bin_dir / "python", "-m", "pip", "install", "-q", "--find-links", wheels,
          "-r", project / "requirements-npu.txt"], timeout=300, env=env, cwd=project)
    installed = _installed(bin_dir)
    assert "npu-runtime" in installed and not {"npu-migrate", "libcst", "click"} & installed, installed

    trained = _run([bin_dir / "python", "train.py", "--epochs", "1"], timeout=300, env=env, cwd=project)
    assert (project / "checkpoint.pt").is_file(), trained.stdout + trained.stderr
    where = _run([bin_dir / "python", "-c", "import npu_runtime; print(npu_runtime.__file__)"], env=env,
                 cwd=tmp_path).stdout
    assert where.startswith(str(tmp_path / "stock")), where
