"""``npu-migrate [OPTIONS] PATH...``: what the command does once click has parsed it.

One function per step, in the order they run: :func:`~npu_migrate.cli.prepare.prepare`
checks what can be checked before touching any file (flag conflicts, report paths,
configuration, rule codes); :func:`migrate_files` finds and migrates the files;
:func:`apply` prints diffs and writes files; :func:`~npu_migrate.cli.emit.emit` prints
the report in the chosen format; :func:`~npu_migrate.cli.emit.exit_code` says how it
went (the codes: :mod:`npu_migrate.cli.prepare`). Standard input has its own path
(:mod:`npu_migrate.cli.stdin`), which shares the first and last steps.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from npu_migrate.cli import stdin
from npu_migrate.cli.emit import emit, exit_code
from npu_migrate.cli.options import Options
from npu_migrate.cli.prepare import (
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    Prepared,
    UsageError,
    consoles,
    default_diff,
    missing_paths,
    prepare,
)
from npu_migrate.pipeline.model import FileResult


def migrate_files(prep: Prepared, err: Console, vendored: str | None = None) -> list[FileResult]:
    """Discover and migrate; files that could not be found come back as errors.
    Discovery's warnings (a named file no front end handles, nothing to migrate)
    are printed here, unless quiet."""
    from npu_migrate.pipeline import discovery
    from npu_migrate.pipeline.discovery import discover
    from npu_migrate.pipeline.runner import default_jobs

    opts = prep.options
    found = discover(opts.paths or ["."], prep.resolved.exclude, prep.root, prep.resolved.force_exclude,
                     outputs=[path for path in (opts.report, opts.output_file) if path])
    for message in found.warnings if not opts.quiet else ():
        err.print(f"warning: {message}")
    if found.leftovers:
        from npu_migrate.pipeline.writer import remove_leftovers

        removed = remove_leftovers(found.leftovers)
        if removed and opts.verbose:
            err.print(f"removed {removed} temp file(s) left by an interrupted run")
    if not found.files and not found.errors and not found.warnings and not opts.quiet:
        err.print("warning: no supported files found")
    failed = [FileResult(path=message.split(":", 1)[0], error=message) for message in found.errors]
    if not found.files:
        return failed
    from npu_migrate.cli import vendor

    if vendored is None:  # each project's own copy, vendored by an earlier run (never another project's)
        vendored = prep.vendored_in_tree = vendor.Finder(found.vendored)

    def project_files(root: str) -> list[str]:
        # the project's files, for its facts: what `npu-migrate ROOT` would migrate
        return discovery.project_files(root, prep.resolved.exclude, prep.root, prep.resolved.force_exclude)
    cache_factory = None
    if opts.cache:
        from npu_migrate.pipeline.cache import Cache, default_directory

        cache_root = Path(opts.cache_dir).absolute() if opts.cache_dir else default_directory(prep.root)

        def cache_factory(settings):
            prep.caches.append(Cache(cache_root, settings.key()))
            return prep.caches[-1]
    results = _run_with_progress(found.files, prep.settings, opts.jobs or default_jobs(), cache_factory, err,
                                 opts.quiet, vendored, project_files)
    _cache_warnings(prep, err)
    return failed + results


def _cache_warnings(prep: Prepared, err: Console) -> None:
    for cache in prep.caches:
        for message in cache.warnings if not prep.options.quiet else ():
            err.print(f"warning: {message}")
        cache.warnings.clear()


def flush_cache(prep: Prepared, err: Console) -> None:
    """Write the cache entries of the run: after the files, so that the cache never
    takes the space a write needs."""
    for cache in prep.caches:
        cache.flush()
    _cache_warnings(prep, err)


def _run_with_progress(files, settings, jobs, cache_factory, err: Console, quiet: bool, vendored=None,
                       project_files=None):
    from npu_migrate.pipeline.runner import run

    if quiet or not err.is_terminal or len(files) <= 8:
        return run(files, settings, jobs, cache_factory, vendored=vendored, project_files=project_files)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    # TextColumn renders its own markup; the console's markup is off so that file
    # names with brackets print as they are.
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("migrating", total=len(files))
        return run(files, settings, jobs, cache_factory, progress=lambda _: bar.advance(task), vendored=vendored,
                   project_files=project_files)


def apply(results: list[FileResult], prep: Prepared, out: Console) -> list[FileResult]:
    """Print the diffs and write the files, as the mode says; returns the results with
    positions of the files as they are on disk afterwards."""
    from npu_migrate.cli import output
    from npu_migrate.pipeline.files import ReadError, read_unchanged

    opts = prep.options
    show_diff = opts.diff if opts.diff is not None else default_diff(opts)
    done = []
    roots = project_roots(prep) if opts.mode == "write" else []
    for result in results:
        if result.error is None and result.changed and (show_diff or opts.mode == "write"):
            try:  # nothing is shown or written for a file that changed since it was read
                original = read_unchanged(result.path, result.source_digest)
            except ReadError as exc:  # gone, unreadable or edited since it was migrated
                done.append(replace(result, error=str(exc), new_source=None))
                continue
            if show_diff:
                output.print_diff(out, output.unified_diff(result.path, original, result.new_source))
            if opts.mode == "write":
                result = _write(result, original, roots)
        done.append(result)
    return done


def project_roots(prep: Prepared) -> list[str]:
    """Where ``--write`` may write (real paths): the project root, each directory given,
    and the directory of each file given (never a named link's far end). A path given
    inside the project that a link (``pkg -> ../../elsewhere``) leads out of it is no
    root: a link in the project never leads a write out of it, named or not."""
    import os

    from npu_migrate.pipeline.writer import inside

    root = os.path.realpath(prep.root)
    roots = [root]
    for path in prep.options.paths or ["."]:
        base = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path)))
        real = os.path.realpath(base)
        if not inside(real, root) and (inside(base, root) or inside(base, os.path.abspath(prep.root))):
            continue
        roots.append(real)
    return roots


def _write(result: FileResult, original: bytes, roots: list[str]) -> FileResult:
    from npu_migrate.pipeline.files import ReadError
    from npu_migrate.pipeline.writer import Refused, write_atomic
    from npu_migrate.reporting.relocate import relocate, split_for

    try:
        write_atomic(result.path, result.new_source, result.source_digest, roots=roots)
    except (ReadError, Refused) as exc:  # edited (or gone) since it was read, a link out, a hard link
        return replace(result, error=str(exc), new_source=None)
    except OSError as exc:
        return replace(result, error=f"{result.path}: cannot write: {exc.strerror or exc}")
    return replace(relocate(result, original, result.new_source, split_for(result.path)), written=True)



def run(options: Options) -> int:
    """The whole command; a closed standard output (``| head``) ends it with one line on
    stderr saying what was written: diffs are printed before any file is written, and
    ``--diff`` never writes, so a closed pipe stops a dry run or ``--check`` before any
    write, and a report that no longer fits the pipe comes after every write."""
    from npu_migrate.pipeline import writer

    try:
        return _run(options)
    except BrokenPipeError:
        import os
        import sys

        # Python's own flush at exit would complain about the closed pipe once more.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print(f"error: standard output was closed before the output ended; "
              f"{len(writer.written)} file(s) written", file=sys.stderr)
        return EXIT_ERROR


def _run(options: Options) -> int:
    from npu_migrate.reporting.report import Report

    out, err = consoles(options.color)
    start = time.perf_counter()
    try:
        prep = prepare(options)
    except UsageError as exc:
        err.print(f"error: {exc}")
        return EXIT_ERROR
    missing = missing_paths(options)
    for line in missing:  # before any file is read: nothing is scanned
        err.print(f"error: {line}")
    if missing:
        return EXIT_ERROR
    if options.stdin:
        return stdin.run(prep, out, err)
    vendored = None
    if options.vendor_runtime:
        try:
            vendored = _vendor_runtime(Path(options.vendor_runtime), options.mode, err)
        except (UsageError, OSError) as exc:
            err.print(f"error: --vendor-runtime: {exc}")
            return EXIT_ERROR
    results = migrate_files(prep, err, options.vendor_runtime)
    vendored_dir = options.vendor_runtime or prep.vendored_in_tree
    if not results:
        return EXIT_OK
    results = apply(results, prep, out)
    from npu_migrate.pipeline import declared

    results = declared.report_undeclared(results, vendored_dir, prep.settings)
    if vendored is not None and not options.quiet:
        _check_vendored_imports(results, vendored, err)
    flush_cache(prep, err)
    report = Report(results, options.mode, prep.resolved.fail_on_findings, options.show_fixes, options.statistics,
                    options.verbose, time.perf_counter() - start, runtime_vendored=_vendored(options, prep))
    if not emit(report, prep, out, err):
        return EXIT_ERROR
    if vendored is not None and options.mode == "check" and vendored.action in ("create", "update") \
            and not options.exit_zero:
        return EXIT_FAILED  # the vendored copy is missing or older
    return exit_code(report, prep)


def _vendor_runtime(directory: Path, mode: str, err: Console):
    """Plan (and with --write make) the vendored copy; the plan, for the exit code."""
    from npu_migrate.cli import vendor
    from npu_migrate.pipeline import runtime_bundle

    try:
        plan = vendor.plan(directory)
    except (vendor.VendorError, runtime_bundle.BundleMissing) as exc:
        raise UsageError(str(exc)) from None
    write = mode == "write" and plan.action in ("create", "update")
    if write:
        vendor.apply(plan)
    err.print(vendor.describe(plan, write))
    return plan


def _check_vendored_imports(results, plan, err: Console) -> None:
    """Entry points that import npu_runtime from another directory than the vendored
    copy's do not find it unless that directory is on PYTHONPATH: say so."""
    from npu_migrate.pipeline.declared import IMPORTS_RUNTIME, source_of

    home = plan.target.parent.absolute()
    for result in results:
        if result.error is None and result.path.endswith(".py"):
            source = source_of(result)
            if source is not None and IMPORTS_RUNTIME.search(source) and Path(result.path).absolute().parent != home:
                err.print(f"warning: {result.path} imports npu_runtime, vendored in {home}: run it with "
                          f"PYTHONPATH={home} (a script's own directory is what Python searches first)")


def _vendored(options, prep) -> bool:
    """The run vendors the runtime (``--vendor-runtime``) or a project of the run holds a
    copy an earlier run vendored (the per-project :class:`~npu_migrate.cli.vendor.Finder`
    found one): then nothing needs installing."""
    if options.vendor_runtime:
        return True
    in_tree = prep.vendored_in_tree
    if in_tree is None:
        return False
    return bool(in_tree.any()) if hasattr(in_tree, "any") else True

