"""Runs the engine over many files: reading, project facts, the cache, and worker
processes (``concurrent.futures``). One file's failure never stops the others.

Every file the cache cannot answer is migrated in a worker process, with
``--jobs 1`` too, so that nothing a file does to the parser can end the run:

* A native crash (libcst's parser is written in Rust; it has overflowed its
  stack on deep nesting) kills a worker, not the run. The files that were in
  flight then run again one after another in a process of their own; the one
  that kills it fails with ``internal error``, and the others go on, then the
  rest of the tree in a fresh pool. At most ``IN_FLIGHT_PER_WORKER`` files per
  worker are in flight, so a crash costs a few files' time, never a re-run of
  the tree.
* Workers ignore SIGINT and SIGHUP and write nothing (the parent writes). Ctrl-C,
  which a terminal sends to the whole process group, therefore reaches only the
  parent: it kills the workers and raises KeyboardInterrupt at once; SIGTERM and
  SIGHUP raise a KeyboardInterrupt there too (npu_migrate/cli/app.py).
* A worker whose parent died (SIGKILL) exits instead of waiting for work forever.

Where no process pool can be made (a platform without ``sem_open``), files are
migrated in this process, without that isolation.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import replace

from npu_migrate.pipeline import declared, file_roles, filetypes
from npu_migrate.pipeline.cache import Cache
from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.files import ReadError, content_digest, read_regular
from npu_migrate.pipeline.model import FileResult
from npu_migrate.pipeline.settings import Settings

#: Files handed to the pool per worker before the first result is back: enough to
#: keep every worker busy, few enough to re-run cheaply when a worker dies.
IN_FLIGHT_PER_WORKER = 2

Outcome = tuple[FileResult, "str | None"]  # a result, and the digest of the bytes it was computed from
Item = tuple[str, "str | None"]  # a path, and its cache key


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _read(path: str) -> tuple[bytes | None, str | None]:
    try:
        return read_regular(path), None
    except ReadError as exc:
        return None, str(exc)


def _internal_error(path: str, what: str) -> FileResult:
    return FileResult(path=path, error=f"{path}:1: internal error in npu-migrate ({what}); please report it")


def migrate_safely(path: str, data: bytes, settings: Settings) -> FileResult:
    """Hand the file to its front end (``npu_migrate/pipeline/filetypes.py`` decides which;
    a file no front end claims is treated as Python, as named files always were),
    turning a bug in a rule into a one-line error for that file. Front ends are
    imported only when a file needs them. Warnings a library raises meanwhile
    (nbformat's ``MissingIDFieldWarning`` on a notebook without cell ids) are caught
    into :attr:`FileResult.warnings`: the command line prints each once, as its own
    line, instead of each worker printing it to stderr with the library's source line."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        result = _migrate_safely(path, data, settings)
    for warning in caught:
        line = caught_warning(warning)
        if line not in result.warnings:
            result.warnings.append(line)
    return result


def caught_warning(warning) -> str:
    """``nbformat MissingIDFieldWarning: Cell is missing an id field, ...``: the library
    (the top package of the warning's category), the category and the message's first
    sentence."""
    category = warning.category
    library = category.__module__.split(".")[0]
    message = str(warning.message).strip().split(". ")[0].rstrip(".")
    origin = f"{library} " if library not in ("builtins", "warnings") else ""
    return f"{origin}{category.__name__}: {message}"


def _migrate_safely(path: str, data: bytes, settings: Settings) -> FileResult:
    from npu_migrate.pipeline.limits import (
        LimitError,
        check_python_memory,
        out_of_memory,
        parse_budget,
    )

    file_type = filetypes.detect(path, data[: filetypes.HEAD_BYTES]) or filetypes.PYTHON
    try:
        if file_type is filetypes.PYTHON:
            check_python_memory(data)  # refused before parsing if it cannot fit (npu_migrate/pipeline/limits.py)
        elif (why := file_roles.data_file_reason(path, data)) is not None:
            return FileResult(path=path, skipped=f"data file ({why})")  # results, metrics, datasets: no rule runs
        with parse_budget():  # tree-sitter's parses of the file, together (npu_migrate/pipeline/limits.py)
            result = _noted(file_type.migrate()(path, data, settings), file_type)
        if file_type is not filetypes.PYTHON and (sibling := file_roles.ascend_sibling(path)) is not None:
            # a launcher or config of the project's CUDA path beside its Ascend one (Python
            # modules: npu_migrate/python/cuda_backend.py, which also drops their import)
            result = _noted(file_roles.left_to_sibling(result, sibling), filetypes.PYTHON)
        # CI workflows run on the CI's (NVIDIA) runners: every rewrite there is reported instead
        return file_roles.report_only(result) if file_roles.is_ci_file(path) else result
    except LimitError as exc:  # over a front end's size or nesting limit (npu_migrate/pipeline/limits.py)
        return FileResult(path=path, error=f"{path}:{exc.line}: {exc.message}")
    except RecursionError:  # a parser recursed past Python's limit anyway: still one line
        return FileResult(path=path, error=f"{path}:1: too deeply nested for npu-migrate's parser; skipped")
    except MemoryError:
        return FileResult(path=path, error=f"{path}:1: {out_of_memory(data)}")
    except Exception as exc:  # noqa: BLE001 - isolate the failure to this file
        return _internal_error(path, f"{type(exc).__name__}: {exc}")


def _noted(result: FileResult, file_type) -> FileResult:
    """``result`` with the summary and impact of its rules (:attr:`FileResult.rule_notes`),
    from the rules this process loaded for ``file_type``."""
    from npu_migrate.pipeline.registry import rules_for

    used = {item.rule for item in (*result.fixes, *result.findings)}
    if used:
        for front_end in file_type.front_ends:
            for rule_id, rule in rules_for(front_end).items():
                if rule_id in used:
                    result.rule_notes[rule_id] = (rule.summary, rule.impact)
    return result


def migrate_path(path: str, settings: Settings) -> Outcome:
    """Read and migrate one file (what a worker does); also the digest of what it read."""
    data, error = _read(path)
    if error is not None:
        return FileResult(path=path, error=error), None
    return migrate_safely(path, data, settings), content_digest(data)


# --------------------------------------------------------------------------- workers

_worker_settings = Settings()


def _init_worker(settings: Settings, type_names: tuple[str, ...]) -> None:
    global _worker_settings
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C does
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # and a closed terminal
    # SIGTERM keeps its default (the pool terminates broken workers with it); not the
    # parent's handler, inherited by fork, which would raise in the worker.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _BLOCKED)  # blocked by _starting_workers
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent,), daemon=True, name="npu-migrate-orphan-guard").start()
    _worker_settings = settings
    _warm(type_names)


def _warm(type_names: tuple[str, ...]) -> None:
    """Import the front ends (and their rules) of the file types in the run."""
    from npu_migrate.pipeline.registry import rules_for

    for name in type_names:
        file_type = filetypes.named(name)
        file_type.migrate()
        for front_end in file_type.front_ends:
            rules_for(front_end)


_preloaded = False


def preload() -> None:
    """Import every front end and its rules in this process, once, so that the workers
    forked from it afterwards start with them instead of importing libcst and the rules
    each (about 1 s of CPU per pass). For a caller that migrates several small trees in
    one process: ``npu-migrate verify`` migrates a copy per twin and per restart, each a
    pass of two pools (code, then the files that declare dependencies), which cost about
    2.4 s of wall per copy of a 4-file project when every worker imported the rules.
    The workers stay processes of their own (a native crash still kills a worker, not the
    caller), and they run the same code on the same modules: only where the imports
    happen moves. Nothing is done where workers are not forked (``spawn`` or
    ``forkserver`` start them in a fresh interpreter, which imports anew anyway), and a
    front end that fails to import here is left to the workers, which report it per
    file as before."""
    global _preloaded
    if _preloaded or multiprocessing.get_start_method() != "fork":
        return
    _preloaded = True
    for file_type in filetypes.FILE_TYPES:  # one at a time: a front end that fails skips only itself
        try:
            _warm((file_type.name,))
        except Exception:  # noqa: BLE001,S112 - the workers import it again and report it per file
            continue


def _exit_with(parent) -> None:
    parent.join()  # returns when the parent process is gone
    os._exit(1)


def _work(path: str) -> Outcome:
    return migrate_path(path, _worker_settings)


def _one_at_a_time_child(connection, paths: list[str], settings: Settings, type_names: tuple[str, ...],
                         data: bytes | None) -> None:
    _init_worker(settings, type_names)
    for path in paths:
        connection.send(_work(path) if data is None else (migrate_safely(path, data, settings), content_digest(data)))
    connection.close()


#: Held while workers start (they inherit the mask and unblock them once they have their handlers).
_BLOCKED = {getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)}


@contextmanager
def _starting_workers() -> Iterator[None]:
    """SIGINT blocked while workers start: they inherit the mask, so an early Ctrl-C
    cannot hit one before it ignores SIGINT; the parent gets it right after."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """End the workers now (they hold nothing that needs a clean exit)."""
    if hasattr(pool, "kill_workers"):  # Python 3.14
        pool.kill_workers()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            process.kill()
        except (OSError, ValueError, AttributeError):
            pass


def _death(exitcode: int | None) -> str:
    """How a worker process ended, in words."""
    if exitcode is not None and exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


def _worker_died(path: str, exitcode: int | None) -> FileResult:
    """The one line for a file whose worker died. SIGKILL is what the kernel's
    out-of-memory killer sends, and SIGABRT what native code (libcst's parser) does
    when an allocation fails under a memory cap: those are named as memory first."""
    death = _death(exitcode)
    if exitcode in (-signal.SIGKILL, -signal.SIGABRT):
        return FileResult(path=path, error=f"{path}:1: the worker migrating this file died ({death}): out of memory, "
                                           "or a crash in a native parser; skipped")
    return _internal_error(path, f"a worker process died on this file: {death}")


def _one_at_a_time(items: list[Item], settings: Settings, type_names: tuple[str, ...],
                   finish: Callable[[str, str | None, Outcome], None], data: bytes | None = None) -> None:
    """Migrate ``items`` one after another in a process of their own (the file's bytes
    are ``data`` where given, for one item). The file a process dies on fails with an
    internal error; the others go on in a new process."""
    pending = deque(items)
    context = multiprocessing.get_context()
    while pending:
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_one_at_a_time_child, daemon=True,
                                  args=(send, [path for path, _ in pending], settings, type_names, data))
        try:
            with _starting_workers():
                process.start()
            send.close()
            while pending:
                try:
                    outcome = receive.recv()
                except EOFError:  # it died on pending[0]
                    break
                finish(*pending.popleft(), outcome)
            process.join()
        except BaseException:
            process.kill()
            process.join()
            raise
        finally:
            receive.close()
        if pending:
            path, key = pending.popleft()
            finish(path, key, (_worker_died(path, process.exitcode), None))


class _NoProcessPool(Exception):
    """This platform cannot run a process pool."""


def _until_broken(queue: deque[Item], settings: Settings, type_names: tuple[str, ...], workers: int,
                  finish: Callable[[str, str | None, Outcome], None]) -> list[Item]:
    """Run the files of ``queue`` in a pool: [] when all are done, or the files that were
    in flight when a worker died (the others stay in ``queue``)."""
    in_flight: dict[Future, Item] = {}
    try:
        pool = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(settings, type_names))
    except (OSError, ImportError, NotImplementedError) as exc:  # no sem_open on this platform
        raise _NoProcessPool from exc

    def fill() -> None:
        while queue and len(in_flight) < workers * IN_FLIGHT_PER_WORKER:
            try:
                future = pool.submit(_work, queue[0][0])
            except BrokenProcessPool:  # a worker died; the files in flight will say so
                return
            in_flight[future] = queue.popleft()

    def harvest(futures) -> bool:
        """Hand on the outcomes of ``futures``; False if the pool broke."""
        broken = False
        for future in futures:
            item = in_flight.pop(future)
            try:
                outcome = future.result()
            except BrokenProcessPool:
                broken = True
                suspects.append(item)
                continue
            except Exception as exc:  # noqa: BLE001 - a bug outside migrate_safely: still one file
                outcome = _internal_error(item[0], f"{type(exc).__name__}: {exc}"), None
            finish(*item, outcome)
        return not broken

    suspects: list[Item] = []
    try:
        with _starting_workers():
            fill()  # the first submit starts the workers
        while in_flight:
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            if not harvest(done):
                harvest(wait(list(in_flight)).done)  # the pool is broken: they all end now
                return suspects
            fill()
        return suspects
    except BaseException:  # Ctrl-C above all: stop now, not when the workers are done
        _kill_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _in_workers(todo: list[Item], settings: Settings, type_names: tuple[str, ...], jobs: int, finish) -> None:
    queue = deque(todo)
    while queue:
        try:
            suspects = _until_broken(queue, settings, type_names, max(1, min(jobs, len(queue))), finish)
        except _NoProcessPool:
            for path, key in queue:
                finish(path, key, migrate_path(path, settings))
            return
        _one_at_a_time(suspects, settings, type_names, finish)


def migrate_data(path: str, data: bytes, settings: Settings) -> FileResult:
    """:func:`migrate_safely` in a process of its own (standard input): a native crash
    fails the file, not the command; Ctrl-C reaches only this process."""
    file_type = filetypes.detect(path, data[: filetypes.HEAD_BYTES]) or filetypes.PYTHON
    outcomes: list[Outcome] = []
    try:
        _one_at_a_time([(path, None)], settings, (file_type.name,), lambda p, k, outcome: outcomes.append(outcome), data)
    except (OSError, ImportError, NotImplementedError):  # no processes here: unisolated
        return migrate_safely(path, data, settings)
    return outcomes[0][0]


def run(
    paths: list[str],
    settings: Settings,
    jobs: int = 1,
    cache: Callable[[Settings], Cache] | None = None,
    progress: Callable[[FileResult], None] | None = None,
    vendored: str | None | Callable[[str], str | None] = None,
    project_files: Callable[[str], list[str]] | None = None,
) -> list[FileResult]:
    """Migrate ``paths``. Files are read once for the project facts and the cache
    keys (only their digests are kept), and again where they are migrated, so
    memory does not grow with the size of the tree. ``vendored``: the directory
    ``--vendor-runtime`` puts npu_runtime in (then nothing declares npu-runtime), or a
    function of a project's root that finds the project's vendored copy.

    ``project_files`` (root -> the project's files): the facts of a file come from its
    whole project (:func:`npu_migrate.pipeline.config.project_root`), whichever of its
    files the run was given, so a file's output is the same whether it is named alone
    (pre-commit), with its folder or with the repository; each project is migrated with
    its own facts and decides its own npu-runtime declaration. Without it, the run's
    files are one project."""
    results: dict[str, FileResult] = {}
    digests: dict[str, str] = {}
    sizes: dict[str, int] = {}

    def contents(group: list[str], others: list[str]):
        for path in group:
            data, error = _read(path)
            if error is not None:
                results[path] = FileResult(path=path, error=error)
                continue
            digests[path] = content_digest(data)
            sizes[path] = len(data)
            yield path, data
        for path in others:  # the project's other files: read for the facts only
            data, error = _read(path)
            if error is None:
                yield path, data

    def done(result: FileResult) -> None:
        results[result.path] = result
        if progress is not None:
            progress(result)

    for root, group, others in _projects(paths, project_files):
        facts = replace(ProjectFacts.scan(contents(group, others)), entry_points=settings.facts.entry_points)
        in_project = replace(settings, facts=facts)
        # Two passes: the files that declare dependencies run after the code, so that they
        # know whether the migrated code imports npu_runtime (npu_migrate/pipeline/declared.py).
        first = [p for p in group if p in digests and not declared.declares_dependencies(p)]
        second = [p for p in group if p in digests and declared.declares_dependencies(p)]
        _pass(first, in_project, jobs, cache, digests, sizes, done)
        if second:
            copy = vendored(root) if callable(vendored) else vendored
            code = [results[p] for p in first]
            requirement = declared.runtime_requirement(facts, code, copy)
            scripts = requirement is not None and declared.only_in_scripts(facts, code)
            _pass(second, replace(in_project, facts=replace(facts, runtime_requirement=requirement,
                                                            runtime_only_in_scripts=scripts)), jobs, cache,
                  digests, sizes, done)
    return [results[p] for p in paths if p in results]


def _projects(paths: list[str], project_files: Callable[[str], list[str]] | None):
    """(root, the run's files of the project, the project's other files) per project,
    in the order of the run's files; one group of all files without ``project_files``."""
    if project_files is None:
        yield None, list(paths), []
        return
    from npu_migrate.pipeline.config import project_root

    memo: dict[str, str] = {}
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(project_root(path, memo), []).append(path)
    for root, group in groups.items():
        named = {os.path.abspath(p) for p in group}
        others = [f for f in project_files(root)
                  if os.path.abspath(f) not in named and project_root(f, memo) == root]
        yield root, group, others


def _pass(paths: list[str], settings: Settings, jobs: int, cache, digests: dict[str, str], sizes: dict[str, int],
          done: Callable[[FileResult], None]) -> None:
    store = cache(settings) if cache is not None else None
    todo: list[Item] = []
    for path in paths:
        digest = digests[path]
        key = None
        if store is not None:  # a template by its place, or a CUDA module by its Ascend sibling, depends on
            # a file beside it (a Helm chart's Chart.yaml, hccl_x.py beside nccl_x.py)
            marks = ":template" if file_roles.template_place(path) is not None else ""
            marks += ":ascend-sibling" if file_roles.ascend_sibling(path) is not None else ""
            key = store.key(path, digest + marks)
        hit = store.get(path, key) if store is not None else None
        if hit is not None:
            hit.source_digest = digest
            done(hit)
        else:
            todo.append((path, key))

    def finish(path: str, key: str | None, outcome: Outcome) -> None:
        result, digest = outcome
        result.source_digest = digest
        # Cached only if the file still has the bytes the key was made from.
        if store is not None and key is not None and digest == digests[path]:
            store.put(key, result)
        done(result)

    # Largest files first, so that no worker starts a long file when the others are done.
    todo.sort(key=lambda item: sizes[item[0]], reverse=True)
    if todo:
        types = tuple(sorted({(filetypes.by_name(p) or filetypes.PYTHON).name for p, _ in todo}))
        _in_workers(todo, settings, types, jobs, finish)
