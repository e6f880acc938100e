"""Runs the engine over many files: reading, project facts, the cache, and a
process pool (``concurrent.futures``). One file's failure never stops the others."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace

from npu_migrate import filetypes
from npu_migrate.cache import Cache, content_digest
from npu_migrate.facts import ProjectFacts
from npu_migrate.model import FileResult
from npu_migrate.settings import Settings

#: Below this many files to parse, a process pool costs more than it saves.
MIN_FILES_FOR_POOL = 4


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _read(path: str) -> tuple[bytes | None, str | None]:
    try:
        with open(path, "rb") as handle:
            return handle.read(), None
    except PermissionError:
        return None, f"{path}: permission denied"
    except IsADirectoryError:
        return None, f"{path}: is a directory"
    except OSError as exc:
        return None, f"{path}: cannot read: {exc.strerror or exc}"


def migrate_safely(path: str, data: bytes, settings: Settings) -> FileResult:
    """Hand the file to its front end (``npu_migrate/filetypes.py`` decides which;
    a file no front end claims is treated as Python, as named files always were),
    turning a bug in a rule into a one-line error for that file. Front ends are
    imported only when a file needs them."""
    file_type = filetypes.detect(path, data[: filetypes.HEAD_BYTES]) or filetypes.PYTHON
    try:
        return file_type.migrate()(path, data, settings)
    except Exception as exc:  # noqa: BLE001 - isolate the failure to this file
        return FileResult(path=path, error=f"{path}:1: internal error in npu-migrate ({type(exc).__name__}: {exc}); please report it")


def migrate_path(path: str, settings: Settings) -> tuple[FileResult, str | None]:
    """Read and migrate one file (what a worker does); also the digest of what it read."""
    data, error = _read(path)
    if error is not None:
        return FileResult(path=path, error=error), None
    return migrate_safely(path, data, settings), content_digest(data)


def _warm_worker(type_names: tuple[str, ...]) -> None:
    """Import the front ends (and their rules) of the file types in the run."""
    from npu_migrate.registry import rules_for

    for name in type_names:
        file_type = filetypes.named(name)
        file_type.migrate()
        for front_end in file_type.front_ends:
            rules_for(front_end)


def run(
    paths: list[str],
    settings: Settings,
    jobs: int = 1,
    cache: Callable[[Settings], Cache] | None = None,
    progress: Callable[[FileResult], None] | None = None,
) -> list[FileResult]:
    """Migrate ``paths``. Files are read once for the project facts and the cache
    keys (only their digests are kept), and again where they are migrated, so
    memory does not grow with the size of the tree."""
    results: dict[str, FileResult] = {}
    digests: dict[str, str] = {}
    sizes: dict[str, int] = {}

    def contents():
        for path in paths:
            data, error = _read(path)
            if error is not None:
                results[path] = FileResult(path=path, error=error)
                continue
            digests[path] = content_digest(data)
            sizes[path] = len(data)
            yield data

    settings = replace(settings, facts=ProjectFacts.scan(contents()))
    store = cache(settings) if cache is not None else None

    def done(result: FileResult) -> None:
        results[result.path] = result
        if progress is not None:
            progress(result)

    todo: list[tuple[str, str | None]] = []
    for path, digest in digests.items():
        key = store.key(path, digest) if store is not None else None
        hit = store.get(path, key) if store is not None else None
        if hit is not None:
            done(hit)
        else:
            todo.append((path, key))

    def finish(path: str, key: str | None, outcome: tuple[FileResult, str | None]) -> None:
        result, digest = outcome
        # Cached only if the file still has the bytes the key was made from.
        if store is not None and key is not None and digest == digests[path]:
            store.put(key, result)
        done(result)

    if jobs <= 1 or len(todo) < MIN_FILES_FOR_POOL:
        for path, key in todo:
            finish(path, key, migrate_path(path, settings))
    else:
        # Largest files first, so that no worker starts a long file when the others are done.
        todo.sort(key=lambda item: sizes[item[0]], reverse=True)
        try:
            types = {(filetypes.by_name(p) or filetypes.PYTHON).name for p, _ in todo}
            with ProcessPoolExecutor(max_workers=jobs, initializer=_warm_worker, initargs=(tuple(sorted(types)),)) as pool:
                futures = {pool.submit(migrate_path, p, settings): (p, k) for p, k in todo}
                for future in as_completed(futures):
                    path, key = futures[future]
                    finish(path, key, future.result())
        except BrokenProcessPool:
            for path, _ in todo:
                if path not in results:
                    done(FileResult(path=path, error=f"{path}:1: internal error: a worker process died"))
    return [results[p] for p in paths if p in results]
