"""``npu-migrate [OPTIONS] PATH...``, the last step: the report in the chosen format,
where it was asked for (:func:`emit`), and the exit code (:func:`exit_code`). Shared
by files (:mod:`npu_migrate.cli.command`) and standard input (:mod:`npu_migrate.cli.stdin`).
"""

from __future__ import annotations

import io

from rich.console import Console

from npu_migrate.cli.prepare import EXIT_ERROR, EXIT_FAILED, EXIT_OK, Prepared
from npu_migrate.reporting.printable import printable


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
    if not opts.quiet:
        library_warnings(report, err)
    if opts.output_file is None and fmt not in reporting.HUMAN:
        out.file.write(reporting.render(fmt, report))
        out.file.flush()
    if opts.quiet:  # as ruff's -q: the diagnostics, nothing else
        for result in report.results:
            if result.error is not None:
                err.print(f"error: {printable(result.error)}")
        if opts.output_file is None and fmt in reporting.HUMAN:
            if report.statistics:  # the counts are the diagnostics asked for
                text.statistics(report, err)
                return written
            for result in report.results:
                for line in text.diagnostics(result, report.show_fixes):
                    err.print(line, soft_wrap=True, highlight=False)
    elif opts.output_file is None and fmt in reporting.HUMAN:
        reporting.write_human(fmt, report, err)
    else:  # the report went elsewhere: errors and the summary only
        for result in report.results:
            if result.error is not None:
                err.print(f"error: {printable(result.error)}")
        text.summary(report, err)
    return written


def library_warnings(report, err: Console) -> None:
    """Each warning a library raised during the run (:attr:`FileResult.warnings`), once,
    with how many files raised it and the first of them."""
    seen: dict[str, list[str]] = {}
    for result in report.results:
        for warning in result.warnings:
            seen.setdefault(warning, []).append(result.path)
    for warning, paths in seen.items():
        where = paths[0] if len(paths) == 1 else f"{len(paths)} files, first {paths[0]}"
        err.print(f"warning: {printable(warning)} ({printable(where)})", soft_wrap=True, highlight=False)


def exit_code(report, prep: Prepared) -> int:
    if any(r.error is not None for r in report.results):
        return EXIT_ERROR
    failing = (prep.options.mode == "check" and report.pending) or (
        prep.resolved.fail_on_findings and report.summary["findings"] > 0)
    return EXIT_FAILED if failing and not prep.options.exit_zero else EXIT_OK

