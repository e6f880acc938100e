"""What installing npu-migrate costs a user, next to ruff and black.

Two measurements, each from nothing (a new virtual environment, pip's cache off):

* ``pip``: ``python -m venv V && V/bin/pip install TARGET``, then one run of the tool:
  install wall time, the environment's size on disk (``du`` of V, so pip and
  setuptools of the bare venv are in every row: the ``bare venv`` row says how much),
  the number of distributions, and whether torch or an NVIDIA wheel came along.
* ``pre-commit`` (``--pre-commit``): a throwaway git repository holding the bundled
  CUDA example and a ``.pre-commit-config.yaml`` with one hook, a fresh
  ``PRE_COMMIT_HOME``; the first ``pre-commit run --all-files`` (which builds the hook
  environment) is timed, and ``PRE_COMMIT_HOME`` measured afterwards. npu-migrate's
  hook comes from this repository at its HEAD commit (``.pre-commit-hooks.yaml``, as a
  user's config names it); ruff's and black's are ``language: python`` hooks with the
  tool as ``additional_dependencies``: what their own hook repositories install.

    python -m bench.install_size [--pre-commit] [--out bench/results/install_size.md]

Packages come from whatever pip is configured with (here a PyPI mirror), so times
follow the network and the machine's load; sizes do not.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda_project"

#: label -> (pip install arguments, the command run once afterwards, relative to the venv's bin/)
TARGETS = {
    "bare venv": ([], None),
    "npu-migrate (pip install .)": ([str(REPO)], ["npu-migrate", str(EXAMPLE), "--no-cache", "--quiet"]),
    "ruff": (["ruff"], ["ruff", "check", "--no-cache", "--exit-zero", "--quiet", str(EXAMPLE)]),
    "black": (["black"], ["black", "--check", "--quiet", str(EXAMPLE)]),
}


def _size_mb(path: Path) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total / 1e6


def _pip_row(label: str, args: list[str], command: list[str] | None, work: Path) -> list[str]:
    env_dir = work / label.split()[0]
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    if args:
        subprocess.run([str(env_dir / "bin" / "pip"), "install", "-q", *args], check=True, env=env)
    installed = time.perf_counter() - start
    ran = ""
    if command:
        start = time.perf_counter()
        proc = subprocess.run([str(env_dir / "bin" / command[0]), *command[1:]], check=False, capture_output=True,
                              env=env)
        ran = f"{time.perf_counter() - start:.1f} s (exit {proc.returncode})"
    freeze = subprocess.run([str(env_dir / "bin" / "pip"), "list", "--format=freeze"], capture_output=True,
                            text=True, env=env, check=True).stdout.lower().splitlines()
    heavy = sorted({line.split("==")[0] for line in freeze if line.startswith(("torch", "nvidia-", "triton"))})
    return [label, f"{installed:.1f} s", f"{_size_mb(env_dir):.1f}", str(len(freeze)), ", ".join(heavy) or "none",
            ran]


def _pre_commit_row(label: str, hook: str, work: Path) -> list[str]:
    project = work / f"project-{label.split()[0]}"
    shutil.copytree(EXAMPLE, project)
    home = work / f"home-{label.split()[0]}"
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PIP_NO_CACHE_DIR": "1"}
    env.pop("VIRTUAL_ENV", None)
    (project / ".pre-commit-config.yaml").write_text(hook)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "x"]):
        subprocess.run(cmd, cwd=project, check=True, env=env)
    pre_commit = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))
    start = time.perf_counter()
    proc = subprocess.run([pre_commit, "run", "--all-files"], check=False, cwd=project, capture_output=True, text=True, env=env)
    first = time.perf_counter() - start
    start = time.perf_counter()
    subprocess.run([pre_commit, "run", "--all-files"], check=False, cwd=project, capture_output=True, env=env)
    second = time.perf_counter() - start
    if "An unexpected error" in proc.stdout + proc.stderr or "CalledProcessError" in proc.stdout + proc.stderr:
        raise SystemExit(f"{label}: pre-commit failed to install the hook\n{proc.stdout}\n{proc.stderr}")
    return [label, f"{first:.1f} s", f"{second:.1f} s", f"{_size_mb(home):.1f}"]


def _pre_commit_configs() -> dict[str, str]:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()
    local = textwrap.dedent("""\
        repos:
          - repo: local
            hooks:
              - id: {name}
                name: {name}
                entry: {entry}
                language: python
                additional_dependencies: [{name}]
                types: [python]
        """)
    return {
        "npu-migrate (hook npu-migrate-check)": textwrap.dedent(f"""\
            repos:
              - repo: {REPO}
                rev: {head}
                hooks:
                  - id: npu-migrate-check
            """),
        "ruff (ruff check)": local.format(name="ruff", entry="ruff check --no-cache --exit-zero"),
        "black (black --check)": local.format(name="black", entry="black --check"),
    }


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pre-commit", action="store_true", help="also measure the pre-commit hook environments")
    parser.add_argument("--out", help="write the tables (markdown) to this file too")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    parts = [(f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python "
              f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.1f} at the start."), ""]
    with tempfile.TemporaryDirectory(prefix="npu-migrate-install-") as tmp:
        work = Path(tmp)
        rows = [_pip_row(label, a, c, work) for label, (a, c) in TARGETS.items()]
        parts += ["pip install into a new venv (no pip cache):", "",
                  _table(["what", "install (wall)", "venv MB", "distributions", "torch / CUDA wheels",
                          "first run on examples/cuda_project"], rows), ""]
        if args.pre_commit:
            rows = [_pre_commit_row(label, hook, work) for label, hook in _pre_commit_configs().items()]
            parts += ["pre-commit, fresh PRE_COMMIT_HOME, examples/cuda_project in a new git repository:", "",
                      _table(["hook", "first run (builds the env)", "second run", "PRE_COMMIT_HOME MB"], rows), ""]
    text = "\n".join(parts)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
