"""The repository-files corpus: what real projects carry besides Python code.

The main corpus (``bench/corpus.py``) is wheels, which hold only the packages'
``.py`` files. Launchers, configs, requirements files and notebooks live in the
projects' source distributions: this module downloads pinned sdists at run time
(``pip download --no-deps --no-binary :all:``, never committed) and unpacks the
files a non-Python front end handles (``npu_migrate/pipeline/filetypes.py``) plus shell
scripts and Dockerfiles, into a cache outside the repository::

    $NPU_MIGRATE_CORPUS_CACHE (default ~/.cache/npu-migrate/corpus)/
        dl-sdist/<artifact>
        repo/<project>-<version>/...             the unpacked repository files
        repo/<project>-<version>/notebooks/...   notebooks derived from its scripts

No sdist on PyPI that we could find carries Jupyter notebooks, so each
project's training scripts that mention CUDA and run as ``__main__`` are also
turned into notebooks the way people paste scripts into Jupyter: imports in one
cell, each function or class in its own cell, the rest in cells between them,
an ``%load_ext autoreload`` cell first and an ``%env`` cell when the script
reads ``CUDA_VISIBLE_DEVICES``.

    python -m bench.repo_corpus [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import CorpusError, default_cache_dir

#: Pinned sdists that carry launchers (mmdet, ultralytics), configs (ultralytics'
#: YAML, trl's accelerate configs, deepspeed's JSON), requirements (every one)
#: and training scripts (turned into notebooks).
REPO_PROJECTS: dict[str, str] = {
    "mmdet": "3.3.0",
    "ultralytics": "8.4.190",
    "trl": "1.16.0",
    "accelerate": "1.15.0",
    "deepspeed": "0.19.8",
}
MANIFEST = ".repo-corpus.json"
#: Derived notebooks per project, at most.
NOTEBOOKS_PER_PROJECT = 12


@dataclass
class RepoProject:
    name: str
    version: str
    root: Path
    files: list[str]  # relative paths, sorted

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"


def wanted(path: str) -> bool:
    """A repository file the audit covers: a non-Python type a front end edits, or a
    shell script / Dockerfile. Markdown is left out: its commands are only reported,
    never written (npu_migrate/markdown/engine.py), so there is no output to audit."""
    from npu_migrate.pipeline import filetypes

    parts = PurePosixPath(path).parts
    if any(p.endswith(".egg-info") or p in ("__pycache__", ".git") for p in parts):
        return False
    name = parts[-1]
    if name.endswith((".sh", ".bash")) or name.startswith(("Dockerfile", "Containerfile")):
        return True
    found = filetypes.by_name(path)
    return found is not None and found.name not in ("python", "markdown")


def _download(name: str, version: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    existing = [p for p in dest.glob(f"{name}-{version}.tar.gz") if p.is_file()]
    if existing:
        return existing[0]
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--no-build-isolation", "--disable-pip-version-check", "-q", "-d", tmp, f"{name}=={version}"]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
        got = [p for p in Path(tmp).iterdir() if p.is_file()]
        if proc.returncode != 0 or len(got) != 1:
            raise CorpusError(f"pip download {name}=={version} (sdist) failed: {proc.stderr.strip()[-300:]}")
        final = dest / got[0].name
        shutil.move(str(got[0]), final)
        return final


def notebook_from_script(source: str) -> str | None:
    """A notebook (nbformat 4 JSON) holding ``source`` split into cells, or None."""
    import nbformat

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.splitlines(keepends=True)
    cells: list[str] = []
    group: list[str] = []
    kind = None

    def flush() -> None:
        text = "".join(group).strip("\n")
        if text:
            cells.append(text)
        group.clear()

    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        chunk = lines[first - 1 : node.end_lineno]
        this = "import" if isinstance(node, (ast.Import, ast.ImportFrom)) else \
            "def" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else "code"
        if this != kind or this == "def":
            flush()
        kind = this
        group.extend(chunk)
    flush()
    head = ["%load_ext autoreload\n%autoreload 2"]
    if "CUDA_VISIBLE_DEVICES" in source:
        head.append("%env CUDA_VISIBLE_DEVICES=0")
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    notebook.cells = [nbformat.v4.new_code_cell(c) for c in head + cells]
    return nbformat.writes(notebook) + "\n"


def ensure_repo_project(name: str, version: str, cache_dir: Path | None = None) -> RepoProject:
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    root = cache / "repo" / f"{name}-{version}"
    manifest = root / MANIFEST
    if manifest.is_file():
        return RepoProject(name, version, root, json.loads(manifest.read_text())["files"])
    artifact = _download(name, version, cache / "dl-sdist")
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache))
    files: list[str] = []
    scripts: list[tuple[str, str]] = []
    try:
        with tarfile.open(artifact) as archive:
            for member in archive.getmembers():
                parts = PurePosixPath(member.name).parts
                if not member.isfile() or len(parts) < 2 or ".." in parts:
                    continue
                rel = PurePosixPath(*parts[1:]).as_posix()
                handle = archive.extractfile(member)
                if handle is None:
                    continue
                if rel.endswith(".py"):
                    text = handle.read().decode("utf-8", "replace")
                    if "cuda" in text and "__main__" in text and "setup" not in parts[-1]:
                        scripts.append((rel, text))
                    continue
                if not wanted(rel):
                    continue
                out = staging / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(handle.read())
                files.append(rel)
        for rel, text in sorted(scripts)[:NOTEBOOKS_PER_PROJECT]:
            notebook = notebook_from_script(text)
            if notebook is None:
                continue
            target = f"notebooks/{rel[:-3].replace('/', '__')}.ipynb"
            (staging / target).parent.mkdir(parents=True, exist_ok=True)
            (staging / target).write_text(notebook, encoding="utf-8")
            files.append(target)
        files.sort()
        (staging / MANIFEST).write_text(json.dumps({"artifact": artifact.name, "files": files}, indent=1))
        if root.exists():
            shutil.rmtree(root)
        root.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return RepoProject(name, version, root, files)


def ensure_repo_corpus(projects: dict[str, str] | None = None, cache_dir: Path | None = None) -> list[RepoProject]:
    out = []
    for name, version in (projects or REPO_PROJECTS).items():
        try:
            out.append(ensure_repo_project(name, version, cache_dir))
        except (CorpusError, OSError, tarfile.TarError, subprocess.TimeoutExpired) as exc:
            print(f"warning: skipping {name}=={version} (repository files): {exc}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", type=Path)
    args = ap.parse_args(argv)
    for project in ensure_repo_corpus(cache_dir=args.cache_dir):
        kinds: dict[str, int] = {}
        for rel in project.files:
            kind = PurePosixPath(rel).suffix or PurePosixPath(rel).name
            kinds[kind] = kinds.get(kind, 0) + 1
        print(f"{project.label}: {len(project.files)} files {kinds} in {project.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
