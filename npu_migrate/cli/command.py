"""``npu-migrate [OPTIONS] PATH...``: what the command does once click has parsed it.

One function per step, in the order they run: :func:`prepare` checks what can be
checked before touching any file (flag conflicts, report paths, configuration,
rule codes); :func:`migrate_files` finds and migrates the files; :func:`apply`
prints diffs and writes files; :func:`emit` prints the report in the chosen
format; :func:`exit_code` says how it went. Standard input has its own path
(:mod:`npu_migrate.cli.stdin`).

Exit codes (as ruff and black): 0 nothing to do, or done; 1 ``--check`` found
pending changes, or ``--fail-on-findings`` found findings (``--exit-zero`` turns
both into 0); 2 usage error, or some file could not be read, parsed or written
(all other files are still processed).
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console

from npu_migrate.cli.options import OptionError, Options, Resolved, resolve
from npu_migrate.pipeline.model import FileResult
from npu_migrate.pipeline.settings import Settings

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """Bad flags or configuration: one line, exit 2, nothing read or written."""


@dataclass
class Prepared:
    options: Options
    resolved: Resolved
    settings: Settings
    root: Path
    #: The run's caches (the runner makes one per pass: code, then dependency files),
    #: flushed after the writes.
    caches: list = field(default_factory=list)

    @property
    def machine_on_stdout(self) -> bool:
        return machine_on_stdout(self.options)


def machine_on_stdout(options: Options) -> bool:
    """Whether a machine-readable report owns stdout."""
    from npu_migrate import reporting

    return options.output_format not in reporting.HUMAN and options.output_file is None


def default_diff(options: Options) -> bool:
    """A dry run prints its diff unless the report is for a machine or goes to a file
    (``--output-file``), or the run is quiet: then only ``--diff`` prints one."""
    from npu_migrate import reporting

    return (options.mode == "dry-run" and not options.quiet and not options.silent
            and options.output_format in reporting.HUMAN and options.output_file is None)


def consoles(color: str = "auto") -> tuple[Console, Console]:
    """(stdout, stderr) consoles: no markup, no highlighting, lines never wrapped.
    ``color``: ``auto`` (colours on a terminal, unless NO_COLOR is set), ``always``
    or ``never`` (``--color``)."""
    extra: dict = {}
    if color == "always":
        extra = {"force_terminal": True, "color_system": "standard"}
    elif color == "never":
        extra = {"color_system": None, "no_color": True}
    return (Console(highlight=False, markup=False, soft_wrap=True, **extra),
            Console(stderr=True, highlight=False, markup=False, soft_wrap=True, **extra))


def prepare(options: Options) -> Prepared:
    """Everything that can fail before a file is read; raises :class:`UsageError`."""
    from npu_migrate.pipeline.config import ConfigError, load_config
    from npu_migrate.pipeline.selection import Selection
    from npu_migrate.reporting import sink

    if options.isolated and options.config is not None:
        raise UsageError("--isolated ignores every configuration file; it cannot be combined with --config")
    if options.stdin and len(options.paths) > 1:
        raise UsageError("'-' (standard input) cannot be combined with other paths")
    if options.mode == "write" and options.diff:
        raise UsageError("--diff shows what --write would change and never writes; drop one of them")
    machine = machine_on_stdout(options)
    if machine and options.diff:
        raise UsageError(f"--diff and --output-format {options.output_format} would both print to stdout; "
                         "give the report an --output-file")
    if machine and options.stdin and options.mode != "check" and not options.diff:
        raise UsageError(f"with standard input the migrated source goes to stdout; give the "
                         f"{options.output_format} report an --output-file")
    for flag, path in (("--output-file", options.output_file), ("--report", options.report)):
        if path is not None:
            try:
                sink.check(path, flag)
            except sink.OutputPathError as exc:
                raise UsageError(str(exc)) from None
    config_paths = [options.stdin_filename or "."] if options.stdin else (options.paths or ["."])
    try:
        cfg = load_config(config_paths, options.config, options.isolated)
        resolved = resolve(options, cfg)
    except (ConfigError, OptionError) as exc:
        raise UsageError(str(exc)) from None
    selection = Selection.create(resolved.select, resolved.ignore, resolved.per_file_ignores)
    from npu_migrate.pipeline.facts import ProjectFacts

    settings = Settings(selection=selection, annotate=options.annotate, prefilter=options.prefilter,
                        target=options.target, facts=ProjectFacts(entry_points=resolved.entry_points))
    return Prepared(options, resolved, settings, cfg.root)


def migrate_files(prep: Prepared, err: Console, vendored: str | None = None) -> list[FileResult]:
    """Discover and migrate; files that could not be found come back as errors.
    Discovery's warnings (a named file no front end handles, nothing to migrate)
    are printed here, unless quiet."""
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
    cache_factory = None
    if opts.cache:
        from npu_migrate.pipeline.cache import Cache, default_directory

        cache_root = Path(opts.cache_dir).absolute() if opts.cache_dir else default_directory(prep.root)

        def cache_factory(settings):
            prep.caches.append(Cache(cache_root, settings.key()))
            return prep.caches[-1]
    results = _run_with_progress(found.files, prep.settings, opts.jobs or default_jobs(), cache_factory, err,
                                 opts.quiet, vendored)
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


def _run_with_progress(files, settings, jobs, cache_factory, err: Console, quiet: bool, vendored: str | None = None):
    from npu_migrate.pipeline.runner import run

    if quiet or not err.is_terminal or len(files) <= 8:
        return run(files, settings, jobs, cache_factory, vendored=vendored)
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
        return run(files, settings, jobs, cache_factory, progress=lambda _: bar.advance(task), vendored=vendored)


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
    and the directory of each file given (never a named link's far end)."""
    import os

    roots = [os.path.realpath(prep.root)]
    for path in prep.options.paths or ["."]:
        roots.append(os.path.realpath(path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))))
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


def emit(report, prep: Prepared, out: Console, err: Console) -> bool:
    """The report in the chosen format, where it was asked for; ``--report`` as JSON.
    False when a report file could not be written (one line on stderr)."""
    from npu_migrate import reporting
    from npu_migrate.reporting import sink, text

    opts = prep.options
    fmt = opts.output_format
    written = True
    for flag, path, name in (("--report", opts.report, "json"), ("--output-file", opts.output_file, fmt)):
        if path is None:
            continue
        if name in reporting.HUMAN:
            buffer = io.StringIO()
            reporting.write_human(name, report, Console(file=buffer, color_system=None, highlight=False,
                                                        markup=False, soft_wrap=True, width=200))
            content = buffer.getvalue()
        else:
            content = reporting.render(name, report)
        try:
            sink.write(path, content)
        except OSError as exc:  # checked before the run, but the disk may have filled since
            err.print(f"error: {flag} {path}: cannot write: {exc.strerror or exc}")
            written = False
    if opts.silent:  # nothing but the exit code
        return written
    if opts.output_file is None and fmt not in reporting.HUMAN:
        out.file.write(reporting.render(fmt, report))
        out.file.flush()
    if opts.quiet:  # as ruff's -q: the diagnostics, nothing else
        for result in report.results:
            if result.error is not None:
                err.print(f"error: {result.error}")
        if opts.output_file is None and fmt in reporting.HUMAN:
            for result in report.results:
                for line in text.diagnostics(result, report.show_fixes):
                    err.print(line, soft_wrap=True, highlight=False)
    elif opts.output_file is None and fmt in reporting.HUMAN:
        reporting.write_human(fmt, report, err)
    else:  # the report went elsewhere: errors and the summary only
        for result in report.results:
            if result.error is not None:
                err.print(f"error: {result.error}")
        text.summary(report, err)
    return written


def exit_code(report, prep: Prepared) -> int:
    if any(r.error is not None for r in report.results):
        return EXIT_ERROR
    failing = (prep.options.mode == "check" and report.pending) or (
        prep.resolved.fail_on_findings and report.summary["findings"] > 0)
    return EXIT_FAILED if failing and not prep.options.exit_zero else EXIT_OK


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
    if options.stdin:
        from npu_migrate.cli import stdin

        return stdin.run(prep, out, err)
    vendored = None
    if options.vendor_runtime:
        try:
            vendored = _vendor_runtime(Path(options.vendor_runtime), options.mode, err)
        except (UsageError, OSError) as exc:
            err.print(f"error: --vendor-runtime: {exc}")
            return EXIT_ERROR
    from npu_migrate.cli import vendor

    vendored_dir = options.vendor_runtime or vendor.find(options.paths or ["."], prep.root)
    results = migrate_files(prep, err, vendored_dir)
    if not results:
        return EXIT_OK
    results = apply(results, prep, out)
    from npu_migrate.pipeline import declared

    results = declared.report_undeclared(results, vendored_dir, prep.settings)
    if vendored is not None and not options.quiet:
        _check_vendored_imports(results, vendored, err)
    flush_cache(prep, err)
    report = Report(results, options.mode, prep.resolved.fail_on_findings, options.show_fixes, options.statistics,
                    options.verbose, time.perf_counter() - start)
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
