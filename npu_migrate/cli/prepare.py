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
    from npu_migrate.pipeline.discovery import invalid_pattern

    bad = invalid_pattern(resolved.exclude)
    if bad is not None:  # one line, not pathspec's traceback at discovery
        where = (f"{cfg.path}: [tool.npu-migrate] exclude" if cfg.path is not None and bad in
                 [*cfg.exclude, *cfg.extend_exclude] else "--exclude")
        raise UsageError(f"{where}: {bad!r} is not a valid gitignore-style pattern")
    selection = Selection.create(resolved.select, resolved.ignore, resolved.per_file_ignores)
    from npu_migrate.pipeline.facts import ProjectFacts

    settings = Settings(selection=selection, annotate=options.annotate, prefilter=options.prefilter,
                        target=options.target, facts=ProjectFacts(entry_points=resolved.entry_points))
    return Prepared(options, resolved, settings, cfg.root)

