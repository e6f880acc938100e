"""``npu-migrate [OPTIONS] PATH...``, step one: everything that can be checked before
any file is read (flag conflicts, report paths, configuration, rule codes), and what
the later steps share: :class:`Prepared` (the options, resolved against the
configuration, and the pipeline's :class:`~npu_migrate.pipeline.settings.Settings`),
the consoles and the exit codes.

Exit codes (as ruff and black): 0 nothing to do, or done; 1 ``--check`` found
pending changes, or ``--fail-on-findings`` found findings (``--exit-zero`` turns
both into 0); 2 usage error, or some file could not be read, parsed or written
(all other files are still processed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from npu_migrate.cli.options import OptionError, Options, Resolved, resolve
from npu_migrate.pipeline.settings import Settings

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2

#: The subcommands (npu_migrate/cli/app.py; tests/engine/test_cli_round3.py checks the
#: list): a path that does not exist but is a near miss of one is a typo of it.
SUBCOMMANDS = ("rules", "explain", "emulate", "verify", "launch", "preflight", "diagnose")


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
    #: a runtime copy an earlier ``--vendor-runtime DIR`` left in the tree, found by discovery
    vendored_in_tree: str | None = None

    @property
    def machine_on_stdout(self) -> bool:
        return machine_on_stdout(self.options)


def machine_on_stdout(options: Options) -> bool:
    """Whether a machine-readable report owns stdout."""
    from npu_migrate import reporting

    return options.output_format not in reporting.HUMAN and options.output_file is None


def default_diff(options: Options) -> bool:
    """A dry run prints its diff unless the report is for a machine or goes to a file
    (``--output-file``), the run is quiet, or it asks for counts (``--statistics``, as
    ruff's prints the counts only): then only ``--diff`` prints one."""
    from npu_migrate import reporting

    return (options.mode == "dry-run" and not options.quiet and not options.silent and not options.statistics
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


def did_you_mean(path: str) -> str:
    """`` (did you mean `npu-migrate explain`?)`` when ``path`` is a near miss of a
    subcommand (``explan``), else ``""``."""
    import difflib

    close = difflib.get_close_matches(path.lower(), SUBCOMMANDS, n=1, cutoff=0.6)
    return f" (did you mean `npu-migrate {close[0]}`?)" if close else ""


def missing_paths(options: Options) -> list[str]:
    """One line per path given that does not exist (a link that leads nowhere exists:
    discovery reports it), with a "did you mean" for a subcommand's near miss. A
    missing path is a usage error, found before any file is read: as black, the run
    does not start (``npu-migrate explan train.py:1`` is no scan of two files)."""
    import os

    if options.stdin:
        return []
    missing = [path for path in options.paths if not os.path.lexists(path)]
    if missing and missing[0] == options.paths[0] and did_you_mean(missing[0]):
        # a mistyped subcommand: what follows it are its arguments, not paths
        return [f"{missing[0]}: no such file or directory{did_you_mean(missing[0])}"]
    return [f"{path}: no such file or directory" for path in missing]


def _exclude_source(pattern: str, options: Options, cfg) -> str:
    """Where an exclude pattern came from, in the order options.resolve joins them: the
    option or the configuration key (with its file) that holds it."""
    table = f"{cfg.path}: [tool.npu-migrate]"
    sources = [("--exclude", options.exclude)] if options.exclude is not None else [(f"{table} exclude", cfg.exclude)]
    sources += [(f"{table} extend-exclude", cfg.extend_exclude), ("--extend-exclude", options.extend_exclude)]
    return next((where for where, patterns in sources if pattern in (patterns or [])), "--exclude")


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
    from npu_migrate.pipeline.discovery import costly_pattern, invalid_pattern

    bad = invalid_pattern(resolved.exclude)
    costly = costly_pattern(list(resolved.exclude)) if bad is None else None
    if bad is not None or costly is not None:  # one line, not pathspec's traceback (or a hang) at discovery
        pattern = bad if bad is not None else list(resolved.exclude)[costly[0]]
        where = _exclude_source(pattern, options, cfg)
        why = f"{bad!r} is not a valid gitignore-style pattern" if bad is not None else costly[1]
        raise UsageError(f"{where}: {why}")
    selection = Selection.create(resolved.select, resolved.ignore, resolved.per_file_ignores)
    from npu_migrate.pipeline.facts import ProjectFacts

    settings = Settings(selection=selection, annotate=options.annotate, prefilter=options.prefilter,
                        target=options.target, facts=ProjectFacts(entry_points=resolved.entry_points))
    return Prepared(options, resolved, settings, cfg.root)

