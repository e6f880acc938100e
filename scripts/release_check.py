#!/usr/bin/env python3
"""Build, check, install and smoke-test both distributions of a release, as the
release workflow (.github/workflows/release.yml) does before it publishes them, and
as CI (.github/workflows/ci.yml) does on every change.

    python scripts/release_check.py [--dist DIR] [--no-isolation] [--runtime-tests]
    python scripts/release_check.py --print-version

1. **One version.** The release's version is the line ``__version__ = "X"`` of
   ``runtime/npu_runtime/__init__.py``; npu-migrate's pyproject reads it through the
   bundled copy (``npu_migrate._runtime``), the runtime's pyproject directly.
2. **Build.** ``python -m build`` for ``.`` (npu-migrate) and ``runtime/`` (npu-runtime):
   the sdist, then the wheel built from that sdist (so the sdist is proven complete).
3. **Metadata.** ``twine check --strict`` on the four files; each file name and each
   ``Version:`` is X; npu-migrate requires neither torch nor npu-runtime (it bundles
   the runtime), npu-runtime requires nothing (torch is the training image's).
4. **Install and smoke-test each wheel in a fresh venv** (no system site packages):
   npu-migrate: ``--version`` and ``-V`` say X, and a dry run of the bundled example
   declares ``npu-runtime==X`` and says how to get it; no torch is installed.
   npu-runtime: ``import npu_runtime`` without torch says X, ``npu-preflight --help`` and
   ``python -m npu_runtime.diagnose --help`` work. With ``--runtime-tests`` the
   runtime's venv also gets torch and runs the runtime tests that start the installed
   package (tests/packaging/test_npu_runtime_wheel.py's list).

Exit 0 when every step passed; otherwise the failing step's output and exit 1. The
built files stay in ``--dist`` (default ``dist/``) for the upload step.
"""

from __future__ import annotations

import argparse
import ast
import email.parser
import shutil
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNTIME = REPO / "runtime"
EXAMPLE = REPO / "examples" / "cuda_project"


class CheckFailed(Exception):
    pass


def shared_version() -> str:
    """The release's version: ``__version__`` in runtime/npu_runtime/__init__.py."""
    tree = ast.parse((RUNTIME / "npu_runtime" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return node.value.value
    raise CheckFailed("runtime/npu_runtime/__init__.py has no __version__")


def run(cmd, step: str, cwd=None, timeout=900) -> subprocess.CompletedProcess:
    print(f"  $ {' '.join(str(c) for c in cmd)}", flush=True)
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          check=False)
    if proc.returncode != 0:
        raise CheckFailed(f"{step}: exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def build(dist: Path, isolation: bool) -> dict[str, list[Path]]:
    files = {}
    for name, source in (("npu_migrate", REPO), ("npu_runtime", RUNTIME)):
        out = dist / name
        shutil.rmtree(out, ignore_errors=True)
        run([sys.executable, "-m", "build", *([] if isolation else ["--no-isolation"]), "--outdir", out, source],
            f"build {name}")
        files[name] = sorted(out.iterdir())
    return files


def _metadata(wheel: Path):
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    return email.parser.Parser().parsestr(text)


def check_metadata(files: dict[str, list[Path]], version: str) -> dict[str, Path]:
    run([sys.executable, "-m", "twine", "check", "--strict", *[f for group in files.values() for f in group]],
        "twine check --strict")
    wheels = {}
    for name, group in files.items():
        sdists = [f for f in group if f.name.endswith(".tar.gz")]
        found = [f for f in group if f.suffix == ".whl"]
        if len(sdists) != 1 or len(found) != 1:
            raise CheckFailed(f"{name}: expected one sdist and one wheel, got {[f.name for f in group]}")
        for f in group:
            if not f.name.startswith(f"{name}-{version}-" if f.suffix == ".whl" else f"{name}-{version}.tar.gz"):
                raise CheckFailed(f"{f.name}: not version {version} (runtime/npu_runtime/__init__.py)")
        meta = _metadata(found[0])
        if meta["Version"] != version:
            raise CheckFailed(f"{found[0].name}: METADATA says Version {meta['Version']}, the release is {version}")
        core = [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r]
        forbidden = [r for r in core if r.split()[0].lower().startswith(("torch", "npu-runtime", "npu_runtime"))]
        if forbidden or (name == "npu_runtime" and core):
            raise CheckFailed(f"{found[0].name}: unexpected hard requirements {forbidden or core}")
        wheels[name] = found[0]
        print(f"  {found[0].name}: Version {version}, requires {len(core)} distribution(s) outside extras")
    return wheels


def wheel_tests() -> list[str]:
    """The runtime tests whose processes start the installed package: the list in
    tests/packaging/test_npu_runtime_wheel.py (read, not imported: that module imports
    torch, which the release job's own Python does not have)."""
    tree = ast.parse((REPO / "tests" / "packaging" / "test_npu_runtime_wheel.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "WHEEL_TESTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise CheckFailed("tests/packaging/test_npu_runtime_wheel.py has no WHEEL_TESTS")


def fresh_venv(path: Path) -> Path:
    venv.create(path, with_pip=True, system_site_packages=False, clear=True)
    return path / "bin"


def smoke_npu_migrate(wheel: Path, version: str, work: Path) -> None:
    bin_dir = fresh_venv(work / "venv-npu-migrate")
    run([bin_dir / "python", "-m", "pip", "install", "-q", wheel], "install npu-migrate")
    for flag in ("--version", "-V"):
        out = run([bin_dir / "npu-migrate", flag], f"npu-migrate {flag}").stdout
        if version not in out:
            raise CheckFailed(f"npu-migrate {flag} printed {out!r}, not {version}")
    project = work / "cuda_project"
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(EXAMPLE, project)
    dry = run([bin_dir / "npu-migrate", project, "--no-cache"], "npu-migrate dry run", cwd=work)
    if f"+npu-runtime=={version}" not in dry.stdout:
        raise CheckFailed(f"the dry run does not declare npu-runtime=={version}:\n{dry.stdout[-2000:]}")
    if f"pip install npu-runtime=={version}" not in dry.stderr or "--vendor-runtime" not in dry.stderr:
        raise CheckFailed(f"the summary does not say how to get npu-runtime:\n{dry.stderr[-2000:]}")
    run([bin_dir / "npu-migrate", "preflight", "--help"], "npu-migrate preflight --help")
    listed = run([bin_dir / "python", "-m", "pip", "list", "--format=freeze"], "pip list").stdout.lower()
    if "torch" in listed or "npu-runtime" in listed:
        raise CheckFailed(f"npu-migrate pulled in torch or npu-runtime:\n{listed}")
    print(f"  npu-migrate {version}: installs without torch, migrates the example, pins npu-runtime=={version}")


def smoke_npu_runtime(wheel: Path, version: str, work: Path, runtime_tests: bool) -> None:
    bin_dir = fresh_venv(work / "venv-npu-runtime")
    run([bin_dir / "python", "-m", "pip", "install", "-q", "--no-index", wheel], "install npu-runtime")
    probe = ("import sys, npu_runtime; assert 'torch' not in sys.modules, 'imports torch'; "
             "print(npu_runtime.__version__)")
    got = run([bin_dir / "python", "-c", probe], "import npu_runtime", cwd=work).stdout.strip()
    if got != version:
        raise CheckFailed(f"npu_runtime.__version__ is {got!r}, the release is {version}")
    run([bin_dir / "npu-preflight", "--help"], "npu-preflight --help", cwd=work)
    run([bin_dir / "python", "-m", "npu_runtime.diagnose", "--help"], "npu_runtime.diagnose --help", cwd=work)
    if runtime_tests:
        run([bin_dir / "python", "-m", "pip", "install", "-q", "--extra-index-url",
             "https://download.pytorch.org/whl/cpu", "torch==2.13.0", "pytest", "pytest-timeout", "hypothesis",
             "numpy"], "install torch (the CPU build where PyTorch's index is reachable) and the test tools")
        tests = work / "runtime_tests"
        shutil.rmtree(tests, ignore_errors=True)
        shutil.copytree(REPO / "tests" / "runtime", tests, ignore=shutil.ignore_patterns("__pycache__"))
        (work / "pytest.ini").write_text("[pytest]\naddopts = -ra --strict-markers -p no:cacheprovider\n"
                                         "timeout = 900\ntimeout_method = thread\n"
                                         "markers =\n    slow: runs real training processes\n")
        run([bin_dir / "python", "-m", "pytest", "-q", *[f"runtime_tests/{t}" for t in wheel_tests()]],
            "runtime tests against the installed wheel", cwd=work, timeout=1800)
    print(f"  npu-runtime {version}: imports without torch, its commands start"
          + (", its wheel tests pass" if runtime_tests else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=REPO / "dist", help="where the built files go (default dist/)")
    parser.add_argument("--no-isolation", action="store_true", help="build with this environment's setuptools")
    parser.add_argument("--runtime-tests", action="store_true",
                        help="also install torch in the runtime's venv and run its wheel tests")
    parser.add_argument("--print-version", action="store_true", help="print the release's version and exit")
    args = parser.parse_args(argv)
    if args.print_version:
        print(shared_version())
        return 0
    try:
        version = shared_version()
        print(f"release {version} (runtime/npu_runtime/__init__.py)")
        print("build:")
        files = build(args.dist.absolute(), not args.no_isolation)
        print("metadata:")
        wheels = check_metadata(files, version)
        with tempfile.TemporaryDirectory(prefix="release-check-") as scratch:
            work = Path(scratch)
            print("npu-migrate wheel:")
            smoke_npu_migrate(wheels["npu_migrate"], version, work)
            print("npu-runtime wheel:")
            smoke_npu_runtime(wheels["npu_runtime"], version, work, args.runtime_tests)
    except CheckFailed as exc:
        print(f"release check FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"release check passed: {', '.join(f.name for group in files.values() for f in group)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
