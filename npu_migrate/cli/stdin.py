"""``npu-migrate - --stdin-filename path.py``: migrate standard input, for editors and
other tools (as ``ruff check --fix -``, ``black -`` and ``pyupgrade -`` do).

The migrated source goes to stdout (the input unchanged when there is nothing
to migrate, when the file cannot be parsed, or when ``--force-exclude`` excludes
the file name); findings and errors go to stderr, with positions in the source
that was printed. ``--diff`` prints a diff instead of the source; ``--check``
prints nothing on stdout and exits 1 when the source would change.

The file name picks the rules' per-file ignores, the configuration (searched
from its directory) and, as more front ends arrive, the front end; it need not
exist.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from rich.console import Console

from npu_migrate.cli.emit import emit, exit_code
from npu_migrate.cli.prepare import Prepared
from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.model import FileResult

DEFAULT_NAME = "-"


def _migrate(name: str, data: bytes, prep: Prepared) -> FileResult:
    from npu_migrate.pipeline.runner import migrate_data

    settings = replace(prep.settings, facts=replace(_facts(name, data, prep), entry_points=prep.settings.facts.entry_points))
    return migrate_data(name, data, settings)


def _facts(name: str, data: bytes, prep: Prepared) -> ProjectFacts:
    """The facts of the project the file name belongs to (its other files as they are on
    disk, this file as read from stdin): the same as a run over the file on disk. A
    name without a directory that exists (or none) has only its own source."""
    import os

    from npu_migrate.pipeline.config import project_root
    from npu_migrate.pipeline.discovery import project_files

    if name == DEFAULT_NAME or not os.path.isdir(os.path.dirname(os.path.abspath(name))):
        return ProjectFacts.scan([(name, data)] if name != DEFAULT_NAME else [data])
    root = project_root(name)
    memo: dict[str, str] = {}
    own = os.path.abspath(name)

    def sources():
        yield name, data
        for path in project_files(root, prep.resolved.exclude, prep.root, prep.resolved.force_exclude):
            if os.path.abspath(path) != own and project_root(path, memo) == root:
                try:
                    with open(path, "rb") as handle:
                        yield path, handle.read()
                except OSError:
                    continue

    return ProjectFacts.scan(sources())


def run(prep: Prepared, out: Console, err: Console) -> int:
    from npu_migrate.cli import output
    from npu_migrate.pipeline.discovery import force_excluded
    from npu_migrate.reporting.relocate import relocate, split_for
    from npu_migrate.reporting.report import Report

    opts = prep.options
    name = opts.stdin_filename or DEFAULT_NAME
    data = sys.stdin.buffer.read()
    if opts.stdin_filename and prep.resolved.force_exclude and force_excluded(name, prep.resolved.exclude, prep.root):
        if opts.mode != "check" and not opts.diff:
            _echo(data)
        return 0
    result = _migrate(name, data, prep)
    new = result.new_source if result.error is None and result.changed else data
    if opts.mode == "check":
        pass
    elif opts.diff:
        if new != data:
            output.print_diff(out, output.unified_diff(name, data, new))
    else:
        _echo(new)
        result = replace(relocate(result, data, new, split_for(name)), written=result.changed)
    report = Report([result], "check" if opts.mode == "check" else "stdin", prep.resolved.fail_on_findings,
                    opts.show_fixes, opts.statistics, opts.verbose)
    if not emit(report, prep, out, err):
        return 2
    return exit_code(report, prep)


def _echo(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
