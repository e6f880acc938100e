"""The effective options of a run: command-line flags over ``[tool.npu-migrate]``.

As in ruff: ``--select``/``--ignore``/``--exclude`` replace the configured lists,
``--extend-select``/``--extend-ignore``/``--extend-exclude`` add to them (after the
configuration's own ``extend-*`` keys). Rule codes are checked wherever they come
from, and an unknown one is an error naming where it was written: the flag, or
the configuration file and key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from npu_migrate.pipeline.config import Config


class OptionError(Exception):
    """A bad option value; ``str()`` is the one-line message (exit 2)."""


@dataclass
class Options:
    """What the command line asked for (None: not given, the configuration decides)."""

    paths: list[str] = field(default_factory=list)
    mode: str = "dry-run"  # "dry-run", "check" or "write"
    diff: bool | None = None
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] | None = None
    extend_ignore: list[str] = field(default_factory=list)
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool | None = None
    jobs: int = 0
    output_format: str = "text"
    output_file: str | None = None
    report: str | None = None
    fail_on_findings: bool | None = None
    exit_zero: bool = False
    statistics: bool = False
    show_fixes: bool = False
    annotate: bool = False
    config: str | None = None
    cache: bool = True
    cache_dir: str | None = None
    vendor_runtime: str | None = None
    #: ``--entry FILE`` (repeatable): training entry points, next to the configuration's.
    entries: list[str] = field(default_factory=list)
    prefilter: bool = True
    quiet: bool = False
    silent: bool = False
    isolated: bool = False
    color: str = "auto"
    verbose: bool = False
    stdin_filename: str | None = None
    #: What CUDA becomes (npu_migrate/pipeline/target.py); only ``npu-migrate verify`` sets "cpu".
    target: str = "npu"

    @property
    def stdin(self) -> bool:
        return self.paths == ["-"] or (not self.paths and self.stdin_filename is not None)


def split_codes(values: tuple[str, ...] | list[str]) -> list[str]:
    """``("NPU1,NPU2", "NPU301")`` -> ``["NPU1", "NPU2", "NPU301"]``."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def check_codes(codes: list[str], where: str) -> None:
    from npu_migrate.pipeline.registry import rule_ids

    known = rule_ids()
    for code in codes:
        upper = code.upper()
        if upper != "ALL" and not any(rid.startswith(upper) for rid in known):
            raise OptionError(f"{where}: unknown rule code or prefix {code!r} (see 'npu-migrate rules')")


def _configured(cfg: Config, key: str) -> str:
    return f"{cfg.path}: [tool.npu-migrate] {key}"


@dataclass
class Resolved:
    select: list[str] | None
    ignore: list[str]
    per_file_ignores: dict[str, list[str]]
    exclude: list[str]
    force_exclude: bool
    fail_on_findings: bool
    #: Absolute paths (or globs) of the named entry points.
    entry_points: tuple[str, ...] = ()


def resolve(options: Options, cfg: Config) -> Resolved:
    """The lists and switches in force, every rule code checked."""
    for key, codes in (("select", cfg.select or []), ("extend-select", cfg.extend_select),
                       ("ignore", cfg.ignore), ("extend-ignore", cfg.extend_ignore)):
        check_codes(codes, _configured(cfg, key))
    for pattern, codes in cfg.per_file_ignores.items():
        check_codes(codes, _configured(cfg, f"per-file-ignores {pattern!r}"))
    for flag, codes in (("--select", options.select or []), ("--extend-select", options.extend_select),
                        ("--ignore", options.ignore or []), ("--extend-ignore", options.extend_ignore)):
        check_codes(codes, flag)

    select = options.select if options.select is not None else cfg.select
    extra = [*cfg.extend_select, *options.extend_select]
    if extra:
        select = [*(select if select is not None else ["ALL"]), *extra]
    ignore = [*(options.ignore if options.ignore is not None else cfg.ignore), *cfg.extend_ignore, *options.extend_ignore]
    exclude = [*(options.exclude if options.exclude is not None else cfg.exclude), *cfg.extend_exclude,
               *options.extend_exclude]
    cwd = Path.cwd()
    per_file = {}
    for pattern, codes in cfg.per_file_ignores.items():  # globs are relative to the config's directory
        anchored = Path(cfg.root, pattern)
        per_file[str(anchored.relative_to(cwd)) if anchored.is_relative_to(cwd) else pattern] = codes
    return Resolved(
        select=select,
        ignore=ignore,
        per_file_ignores=per_file,
        exclude=exclude,
        force_exclude=options.force_exclude if options.force_exclude is not None else cfg.force_exclude,
        fail_on_findings=options.fail_on_findings if options.fail_on_findings is not None else cfg.fail_on_findings,
        entry_points=tuple([str(Path(cfg.root, pattern)) for pattern in cfg.entry_points]
                           + [str(Path(entry).absolute()) for entry in options.entries]),
    )
