"""The benchmark corpus: real PyTorch training libraries, downloaded at run time.

Nothing here is committed: ``pip download --no-deps`` fetches each pinned
artifact (a wheel, or the sdist where PyPI has no wheel) into a cache directory
outside the repository, and only its ``.py`` files are unpacked next to it::

    $NPU_MIGRATE_CORPUS_CACHE (default ~/.cache/npu-migrate/corpus)/
        dl/<artifact>                  what pip downloaded
        src/<project>-<version>/...    the unpacked .py files
        src/<project>-<version>/.corpus.json   artifact name, size, files, lines

A project that fails to download is skipped with a warning (``strict=True``
raises instead: the CI smoke test must fail loudly when PyPI is unreachable).

    python -m bench.corpus [--projects accelerate,timm] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import count_lines, markdown_table

#: Exact versions, all checked with ``pip download --no-deps`` on PyPI.
#: deepspeed publishes only an sdist; every other project is a wheel.
PROJECTS: dict[str, str] = {
    "transformers": "5.23.0",
    "timm": "1.0.31",
    "ultralytics": "8.4.190",
    "accelerate": "1.15.0",
    "deepspeed": "0.19.8",
    "lightning": "2.6.6",
    "diffusers": "0.42.1",
    "peft": "0.21.2",
    "trl": "1.16.0",
    "mmengine": "0.10.7",
}

MANIFEST = ".corpus.json"


class CorpusError(RuntimeError):
    """A project could not be downloaded or unpacked."""


@dataclass
class Project:
    name: str
    version: str
    root: Path           # directory holding the unpacked .py files
    artifact: str        # file name of the wheel or sdist
    artifact_bytes: int
    files: int
    lines: int

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"


def default_cache_dir() -> Path:
    env = os.environ.get("NPU_MIGRATE_CORPUS_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "npu-migrate" / "corpus"


def parse_projects(spec: str | None) -> dict[str, str]:
    """``"accelerate,timm"`` -> their pinned versions; ``name==ver`` overrides a pin."""
    if not spec:
        return dict(PROJECTS)
    chosen: dict[str, str] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, _, version = item.partition("==")
        if not version:
            if name not in PROJECTS:
                raise SystemExit(f"unknown project {name!r}; known: {', '.join(PROJECTS)}")
            version = PROJECTS[name]
        chosen[name] = version
    return chosen


def _pip_download(name: str, version: str, dest: Path) -> Path:
    """Download exactly one artifact of name==version into *dest*; return its path."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        base = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                "-q", "-d", tmp, f"{name}=={version}"]
        proc = subprocess.run(base, capture_output=True, text=True)
        if proc.returncode != 0:
            # An sdist (deepspeed) makes pip prepare its metadata, which may import
            # torch from setup.py: retry against the installed environment.
            proc = subprocess.run(base + ["--no-build-isolation"], capture_output=True, text=True)
        got = [p for p in Path(tmp).iterdir() if p.is_file()]
        if proc.returncode != 0 or len(got) != 1:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise CorpusError(f"pip download {name}=={version} failed (exit {proc.returncode}): "
                              + " | ".join(tail))
        final = dest / got[0].name
        shutil.move(str(got[0]), final)
        return final


def _safe_member(name: str) -> PurePosixPath | None:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not name.endswith(".py"):
        return None
    return path


def unpack_python_files(artifact: Path, target: Path) -> tuple[int, int]:
    """Extract the .py files of a wheel/zip or sdist tarball into *target*.

    An sdist's single top-level ``name-version/`` directory is stripped. Returns
    (files, lines).
    """
    files = lines = 0
    target.mkdir(parents=True, exist_ok=True)

    def emit(member: PurePosixPath, data: bytes) -> None:
        nonlocal files, lines
        out = target.joinpath(*member.parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        files += 1
        lines += count_lines(data)

    name = artifact.name
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(artifact) as zf:
            for info in zf.infolist():
                member = _safe_member(info.filename)
                if member is not None and not info.is_dir():
                    emit(member, zf.read(info))
    elif name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar")):
        with tarfile.open(artifact) as tf:
            members = [m for m in tf.getmembers() if m.isfile()]
            tops = {PurePosixPath(m.name).parts[0] for m in members if PurePosixPath(m.name).parts}
            strip = 1 if len(tops) == 1 else 0
            for m in members:
                member = _safe_member(m.name)
                if member is None or len(member.parts) <= strip:
                    continue
                handle = tf.extractfile(m)
                if handle is not None:
                    emit(PurePosixPath(*member.parts[strip:]), handle.read())
    else:
        raise CorpusError(f"do not know how to unpack {artifact}")
    return files, lines


def ensure_project(name: str, version: str, cache_dir: Path | None = None,
                   downloader=_pip_download) -> Project:
    """Download and unpack name==version unless the cache already has it."""
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    root = cache / "src" / f"{name}-{version}"
    manifest = root / MANIFEST
    if manifest.is_file():
        meta = json.loads(manifest.read_text())
        return Project(name, version, root, meta["artifact"], meta["artifact_bytes"],
                       meta["files"], meta["lines"])
    dl_dir = cache / "dl"
    existing = [p for p in dl_dir.glob(f"{name}-{version}[.-]*") if p.is_file()] if dl_dir.is_dir() else []
    artifact = existing[0] if existing else downloader(name, version, dl_dir)
    if root.exists():
        shutil.rmtree(root)
    (cache / "src").mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache / "src"))
    try:
        files, lines = unpack_python_files(artifact, staging)
        meta = {"name": name, "version": version, "artifact": artifact.name,
                "artifact_bytes": artifact.stat().st_size, "files": files, "lines": lines}
        (staging / MANIFEST).write_text(json.dumps(meta, indent=1))
        staging.rename(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Project(name, version, root, meta["artifact"], meta["artifact_bytes"], files, lines)


def ensure_corpus(projects: dict[str, str] | None = None, cache_dir: Path | None = None,
                  strict: bool = False, downloader=_pip_download) -> list[Project]:
    """Every requested project that could be fetched (in the pinned order)."""
    out: list[Project] = []
    for name, version in (projects or PROJECTS).items():
        try:
            out.append(ensure_project(name, version, cache_dir, downloader=downloader))
        except (CorpusError, OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
            if strict:
                raise
            warnings.warn(f"skipping {name}=={version}: {exc}", stacklevel=2)
            print(f"warning: skipping {name}=={version}: {exc}", file=sys.stderr)
    return out


def python_files(root: Path, sample: int = 1) -> list[Path]:
    """The project's .py files relative to *root*, sorted; every *sample*-th one."""
    files = sorted(p.relative_to(root) for p in root.rglob("*.py") if p.is_file())
    return files[:: max(1, sample)]


def summary_table(projects: list[Project]) -> str:
    rows = []
    for p in projects:
        rows.append([p.name, p.version, p.artifact, f"{p.artifact_bytes / 1e6:.1f} MB",
                     f"{p.files:,}", f"{p.lines:,}"])
    rows.append(["**total**", "", "", f"{sum(p.artifact_bytes for p in projects) / 1e6:.1f} MB",
                 f"{sum(p.files for p in projects):,}", f"{sum(p.lines for p in projects):,}"])
    return markdown_table(["project", "version", "artifact", "size", ".py files", "lines"], rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--projects", help="comma-separated subset (default: all pinned projects)")
    ap.add_argument("--cache-dir", type=Path, help="default: $NPU_MIGRATE_CORPUS_CACHE or ~/.cache/npu-migrate/corpus")
    ap.add_argument("--strict", action="store_true", help="fail instead of skipping a failed download")
    args = ap.parse_args(argv)
    projects = ensure_corpus(parse_projects(args.projects), args.cache_dir, strict=args.strict)
    print(summary_table(projects))
    for p in projects:
        print(f"{p.label}: {p.root}")
    return 0 if projects else 1


if __name__ == "__main__":
    sys.exit(main())
