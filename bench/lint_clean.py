"""Lint-clean output on real repositories (issue 37.4): ruff before and after migration.

For each repository (fetched at run time, never committed): ruff is run over the
files the migration is given, the migration writes them, and ruff runs again. A
violation counts as *new* when its (file, code) appears more often after than before
(line numbers move, so they are not compared). The repository's own ruff
configuration is used where it has one (``ruff.toml``, ``.ruff.toml`` or
``[tool.ruff]`` in ``pyproject.toml``); elsewhere ruff's defaults plus isort
(``--extend-select I``) and ``RUF100`` (a ``noqa`` the migration wrote that is not
needed). The goal is 0 new violations everywhere.

    python -m bench.lint_clean [--mirror DIR] [--work DIR] [--output FILE]

``--mirror DIR``: local clones laid out as ``DIR/<owner>+<name>/repo`` (a mirror
of GitHub); without it each repository is cloned from GitHub (``git clone
--depth 1``).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import RESULTS_DIR, markdown_table, npu_migrate_cmd

#: (owner/name, the paths the migration is given: what a user would run it on)
REPOS: list[tuple[str, list[str]]] = [
    ("karpathy/nanoGPT", ["."]),
    ("karpathy/minGPT", ["."]),
    ("karpathy/llama2.c", ["."]),
    ("kuangliu/pytorch-cifar", ["."]),
    ("facebookresearch/DiT", ["."]),
    ("facebookresearch/ConvNeXt", ["."]),
    ("facebookresearch/mae", ["."]),
    ("facebookresearch/deit", ["."]),
    ("pytorch/examples", ["mnist/main.py", "imagenet/main.py", "word_language_model/main.py",
                          "word_language_model/model.py", "dcgan/main.py", "distributed/ddp-tutorial-series"]),
    ("huggingface/pytorch-image-models", ["train.py", "validate.py", "inference.py", "benchmark.py"]),
    ("lucidrains/denoising-diffusion-pytorch", ["."]),
]


STRICT = "E,F,I,RUF100"


@dataclass
class Outcome:
    repo: str
    config: str
    files_changed: int
    before: int
    after: int
    new: dict[str, int]
    #: the same with ``--select E,F,I,RUF100`` (issue 37.4's own measure), before -> after, new
    strict: tuple[int, int, dict[str, int]]


def _has_ruff_config(repo: Path) -> bool:
    if (repo / "ruff.toml").is_file() or (repo / ".ruff.toml").is_file():
        return True
    pyproject = repo / "pyproject.toml"
    return pyproject.is_file() and "[tool.ruff" in pyproject.read_text(encoding="utf-8", errors="replace")


def _ruff(repo: Path, paths: list[str], own_config: bool, select: str | None = None) -> collections.Counter:
    flags = ["--isolated", "--select", select] if select else [] if own_config else [
        "--isolated", "--extend-select", "I,RUF100"]
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "json", "--exit-zero", *flags,
                           *paths], cwd=repo, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ruff failed in {repo}: {proc.stderr[-500:]}")
    counts: collections.Counter = collections.Counter()
    for item in json.loads(proc.stdout or "[]"):
        counts[(str(Path(item["filename"]).resolve().relative_to(repo.resolve())), item["code"] or "E999")] += 1
    return counts


def _source(name: str, paths: list[str], mirror: Path | None, work: Path) -> Path:
    target = work / name.replace("/", "+")
    if target.exists():
        shutil.rmtree(target)
    origin = str(mirror / name.replace("/", "+") / "repo") if mirror else f"https://github.com/{name}.git"
    env = {"GIT_TERMINAL_PROMPT": "0", "PATH": "/usr/bin:/bin"}
    # only the paths the migration is given (and the ruff configuration): large
    # repositories (pytorch/examples) carry data files a partial mirror may lack
    subprocess.run(["git", "clone", "-q", "--no-checkout", *([] if mirror else ["--depth", "1"]), origin,
                    str(target)], check=True, env=env)
    for path in [*paths, "pyproject.toml", "ruff.toml", ".ruff.toml"]:
        subprocess.run(["git", "checkout", "-q", "HEAD", "--", path], cwd=target, env=env, capture_output=True,
                       check=path not in ("pyproject.toml", "ruff.toml", ".ruff.toml"))
    return target


def run_one(name: str, paths: list[str], mirror: Path | None, work: Path) -> Outcome:
    repo = _source(name, paths, mirror, work)
    own = _has_ruff_config(repo)
    before = _ruff(repo, paths, own)
    strict_before = _ruff(repo, paths, own, STRICT)
    proc = subprocess.run([*npu_migrate_cmd(), *paths, "--write", "--no-cache", "--quiet", "--exit-zero"], cwd=repo,
                          capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"npu-migrate failed in {name}: {proc.stderr[-500:]}")
    changed = subprocess.run(["git", "diff", "--name-only"], cwd=repo, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    after = _ruff(repo, paths, own)
    strict_after = _ruff(repo, paths, own, STRICT)
    return Outcome(name, "own" if own else "defaults + I, RUF100", len(changed),
                   sum(before.values()), sum(after.values()), _new(before, after),
                   (sum(strict_before.values()), sum(strict_after.values()), _new(strict_before, strict_after)))


def _new(before: collections.Counter, after: collections.Counter) -> dict[str, int]:
    new: collections.Counter = collections.Counter()
    for key, count in after.items():
        if count > before.get(key, 0):
            new[key[1]] += count - before.get(key, 0)
    return dict(new)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirror", type=Path, help="local clones, DIR/<owner>+<name>/repo")
    parser.add_argument("--work", type=Path, help="where the clones are migrated (default: a temporary directory)")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "lint_clean.md")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="npu-migrate-lint-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    outcomes = []
    for name, paths in REPOS:
        try:
            outcome = run_one(name, paths, args.mirror, work)
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            print(f"{name}: skipped: {exc}", file=sys.stderr)
            continue
        outcomes.append(outcome)
        new = ", ".join(f"{code} {n}" for code, n in sorted(outcome.new.items())) or "none"
        strict_new = ", ".join(f"{code} {n}" for code, n in sorted(outcome.strict[2].items())) or "none"
        rows.append([outcome.repo, outcome.config, outcome.files_changed, outcome.before, outcome.after, new,
                     f"{outcome.strict[0]} -> {outcome.strict[1]}", strict_new])
        print(f"{name}: {outcome.files_changed} file(s) changed, ruff {outcome.before} -> {outcome.after}, new: {new}",
              flush=True)
    table = markdown_table(["repository", "ruff configuration", "files changed", "violations before",
                            "after", "new after migration", "E,F,I,RUF100 before -> after", "new (E,F,I,RUF100)"], rows)
    total_new = sum(sum(o.new.values()) for o in outcomes)
    strict_total = sum(sum(o.strict[2].values()) for o in outcomes)
    text = (f"# Lint-clean output (`bench/lint_clean.py`)\n\n{table}\n\n"
            f"{len(outcomes)} repositories, {sum(o.files_changed for o in outcomes)} files changed, "
            f"{total_new} new violation(s) under the repositories' configuration or ruff's defaults, "
            f"{strict_total} under `--select E,F,I,RUF100`.\n")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text)
    return 1 if total_new else 0


if __name__ == "__main__":
    sys.exit(main())
