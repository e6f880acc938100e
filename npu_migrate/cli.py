"""The ``npu-migrate`` command line (click).

``npu-migrate [PATH]...`` is a dry run that prints a diff; ``--write`` rewrites in
place; ``--check`` is the CI / pre-commit guard. ``npu-migrate rules [ID]``
documents the rules and ``npu-migrate emulate SCRIPT`` runs a script on the
emulated NPU.

Exit codes (as black): 0 nothing to do or written; 1 ``--check`` found pending
changes; 2 usage error, or some file could not be read or parsed (all other
files are still processed).

This module must stay cheap to import: no torch, and libcst only once a file
actually needs parsing.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import time
from pathlib import Path

import click

from npu_migrate import __version__

EXIT_OK, EXIT_PENDING, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


def _exits_on_interrupt(command):
    """Ctrl-C ends a run at once with exit 130 and one line saying how many files
    were written (none is written after it: see npu_migrate/writer.py); a second
    Ctrl-C ends the process on the spot, whatever it is doing."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        from npu_migrate import writer

        writer.written.clear()
        previous = signal.getsignal(signal.SIGINT)
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, lambda signum, frame: os._exit(EXIT_INTERRUPTED))
            click.echo(f"interrupted: {len(writer.written)} file(s) written before the interrupt, none after it",
                       err=True)
            sys.exit(EXIT_INTERRUPTED)
        finally:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)

    return run


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


class _DefaultToMigrate(click.Group):
    """``npu-migrate PATH...`` means ``npu-migrate migrate PATH...``."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--version", "-h", "--help")):
            args = ["migrate", *args]
        return super().parse_args(ctx, args)

    def format_help(self, ctx, formatter):
        migrate_cmd = self.commands["migrate"]
        with click.Context(migrate_cmd, info_name=ctx.info_name, parent=None) as sub:
            migrate_cmd.format_help(sub, formatter)


@click.group(cls=_DefaultToMigrate, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="npu-migrate")
def main() -> None:
    """Migrate CUDA PyTorch code to Ascend NPUs (torch_npu, HCCL)."""


@main.command(
    "migrate",
    epilog="Other commands: 'npu-migrate rules [ID]' documents every rule; "
    "'npu-migrate emulate SCRIPT' runs a migrated script on the emulated NPU.",
)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--write", is_flag=True, help="Rewrite files in place (atomically).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change.")
@click.option("--diff/--no-diff", default=None, help="Print a unified diff (default: on for a dry run).")
@click.option("--select", multiple=True, metavar="CODES", help="Rule ids or prefixes to run (comma-separated).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rule ids or prefixes to skip (comma-separated).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip paths matching GLOB (gitignore syntax).")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=0, help="Worker processes (default: CPU count).")
@click.option("--report", type=click.Path(dir_okay=False), help="Write a JSON report of fixes and findings.")
@click.option("--annotate", is_flag=True, help="Add a '# npu-migrate: NPUxxx ...' comment above each finding.")
@click.option("--config", type=click.Path(dir_okay=False), help="Use this pyproject.toml instead of searching.")
@click.option("--no-cache", is_flag=True, help="Do not read or write .npu_migrate_cache/.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Cache directory (default: <project>/.npu_migrate_cache).")
@click.option("--vendor-runtime", type=click.Path(file_okay=False), metavar="DIR", help="Copy the npu_runtime package into DIR.")
@click.option("--no-prefilter", is_flag=True, hidden=True, help="Parse every file (to verify the prefilter).")
@click.option("-q", "--quiet", is_flag=True, help="Only print errors (and the diff, if --diff is given).")
@click.option("-v", "--verbose", is_flag=True, help="Print suggestions, per-file status and timing.")
@_exits_on_interrupt
def migrate(paths, write, check, diff, select, ignore, exclude, jobs, report, annotate, config, no_cache,
            cache_dir, vendor_runtime, no_prefilter, quiet, verbose) -> None:
    """Migrate PATHS (files or directories; default: the current directory).

    Without --write this is a dry run that prints the diff for review.
    """
    from rich.console import Console

    from npu_migrate import output
    from npu_migrate.config import ConfigError, load_config
    from npu_migrate.discovery import discover
    from npu_migrate.files import ReadError, read_unchanged
    from npu_migrate.selection import Selection
    from npu_migrate.settings import Settings

    err = Console(stderr=True, highlight=False, markup=False, soft_wrap=True)
    out = Console(highlight=False, markup=False, soft_wrap=True)
    if write and check:
        raise click.UsageError("--write and --check cannot be combined")
    paths = list(paths) or ["."]
    try:
        cfg = load_config(paths, config)
    except ConfigError as exc:
        err.print(f"error: {exc}")
        sys.exit(EXIT_ERROR)

    select_codes = _split(select) if select else cfg.select
    ignore_codes = _split(ignore) if ignore else cfg.ignore
    _validate_codes(select_codes or [], "--select")
    _validate_codes(ignore_codes, "--ignore")
    per_file = {str(Path(cfg.root, k).relative_to(Path.cwd())) if Path(cfg.root, k).is_relative_to(Path.cwd()) else k: v
                for k, v in cfg.per_file_ignores.items()}
    selection = Selection.create(select_codes, ignore_codes, per_file)
    settings = Settings(selection=selection, annotate=annotate, prefilter=not no_prefilter)

    if vendor_runtime:
        _vendor_runtime(Path(vendor_runtime), err)

    start = time.perf_counter()
    found = discover(paths, [*cfg.exclude, *exclude], cfg.root)
    for message in found.errors:
        err.print(f"error: {message}")
    for message in found.warnings:
        if not quiet:
            err.print(f"warning: {message}")
    if found.leftovers:
        from npu_migrate.writer import remove_leftovers

        removed = remove_leftovers(found.leftovers)
        if removed and verbose:
            err.print(f"removed {removed} temp file(s) left by an interrupted run")
    if not found.files and not found.errors:
        if not quiet and not found.warnings:
            err.print("warning: no supported files found", highlight=False)
        sys.exit(EXIT_OK)

    from npu_migrate.cache import DIRNAME, Cache
    from npu_migrate.runner import default_jobs

    cache_factory = None
    if not no_cache:
        cache_root = Path(cache_dir) if cache_dir else cfg.root / DIRNAME
        cache_factory = lambda s: Cache(cache_root, s.key())

    results = _run_with_progress(found.files, settings, jobs or default_jobs(), cache_factory, err, quiet)
    mode = "write" if write else "check" if check else "diff"
    show_diff = diff if diff is not None else (mode == "diff" and not quiet)

    for result in results:
        if result.error is not None:
            err.print(f"error: {result.error}", soft_wrap=True)
            continue
        if not result.changed:
            if verbose:
                err.print(f"unchanged: {result.path}", soft_wrap=True)
            continue
        try:  # nothing is shown or written for a file that changed since it was read
            original = read_unchanged(result.path, result.source_digest) if show_diff else None
            if write:
                from npu_migrate.writer import write_atomic

                write_atomic(result.path, result.new_source, result.source_digest)
                result.written = True
        except (ReadError, OSError) as exc:
            result.error = str(exc) if isinstance(exc, ReadError) else f"{result.path}: cannot write: {exc.strerror or exc}"
            result.new_source = None
            err.print(f"error: {result.error}", soft_wrap=True)
            continue
        if original is not None:
            output.print_diff(out, output.unified_diff(result.path, original, result.new_source))
        if write and verbose:
            err.print(f"migrated: {result.path}", soft_wrap=True)
        elif check and not quiet:
            err.print(f"would migrate: {result.path}", soft_wrap=True)

    summary = output.summarise(results)
    summary["files_failed"] += len(found.errors)
    if not quiet:
        output.print_findings(err, results, verbose)
        output.print_summary(err, summary, mode)
        if verbose:
            err.print(f"took {time.perf_counter() - start:.2f}s")
    if report:
        _write_report(report, results, found.errors, summary)

    if found.errors or any(r.error for r in results):
        sys.exit(EXIT_ERROR)
    if check and any(r.changed for r in results):
        sys.exit(EXIT_PENDING)
    sys.exit(EXIT_OK)


def _validate_codes(codes: list[str], flag: str) -> None:
    from npu_migrate.registry import rule_ids

    known = rule_ids()
    for code in codes:
        upper = code.upper()
        if upper != "ALL" and not any(rid.startswith(upper) for rid in known):
            raise click.BadParameter(f"unknown rule code or prefix {code!r}", param_hint=flag)


def _run_with_progress(files, settings, jobs, cache_factory, err, quiet):
    from npu_migrate.runner import run

    if quiet or not err.is_terminal or len(files) <= 8:
        return run(files, settings, jobs, cache_factory)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("migrating", total=len(files))
        return run(files, settings, jobs, cache_factory, progress=lambda _: bar.advance(task))


def _write_report(path: str, results, discovery_errors: list[str], summary: dict) -> None:
    files = [r.to_json() for r in results]
    files += [{"path": e.split(":", 1)[0], "changed": False, "error": e, "fixes": [], "findings": []}
              for e in discovery_errors]
    Path(path).write_text(json.dumps({"version": __version__, "files": files, "summary": summary}, indent=1) + "\n",
                          encoding="utf-8")


def _vendor_runtime(directory: Path, err) -> None:
    import importlib.util
    import shutil

    spec = importlib.util.find_spec("npu_runtime")
    if spec is None or not spec.submodule_search_locations:
        raise click.ClickException("npu_runtime is not installed next to npu-migrate")
    source = Path(list(spec.submodule_search_locations)[0])
    target = directory / "npu_runtime"
    shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    err.print(f"copied npu_runtime to {target}")


@main.command("rules")
@click.argument("rule_id", required=False)
def rules_command(rule_id: str | None) -> None:
    """List every rule, or show one rule's documentation."""
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.table import Table

    from npu_migrate.registry import all_rules
    from npu_migrate.rulebase import rule_doc

    console = Console(highlight=False)
    rules = all_rules()
    if rule_id is not None:
        rule = rules.get(rule_id.upper())
        if rule is None:
            raise click.BadParameter(f"no rule {rule_id!r}; run 'npu-migrate rules' for the list", param_hint="RULE_ID")
        doc = rule_doc(rule)
        console.print(Markdown(doc) if console.is_terminal else doc, soft_wrap=True)
        return
    if not console.is_terminal:
        for rid, rule in rules.items():
            click.echo(f"{rid}  {rule.name:<32} {'fix' if rule.fixable else '   '}  {rule.summary}")
        return
    table = Table("id", "name", "fix", "summary", box=None, show_edge=False)
    for rid, rule in rules.items():
        table.add_row(rid, rule.name, "yes" if rule.fixable else "-", rule.summary)
    console.print(table)


@main.command("emulate", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--nproc", type=click.IntRange(min=1), default=1, help="Processes (>1 runs torchrun with backend hccl).")
@click.option("--strict", is_flag=True, help="Reject float64 and ops Ascend lacks.")
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def emulate_command(nproc: int, strict: bool, script: str, args: tuple[str, ...]) -> None:
    """Run SCRIPT with an emulated torch_npu (CPU-backed 'npu' device). Needs the [emulate] extra."""
    try:
        from npu_migrate.emulate.launcher import run as run_emulated
    except ImportError as exc:
        raise click.ClickException(f"the emulator is not available ({exc}); pip install 'npu-migrate[emulate]'")
    sys.exit(run_emulated(script, list(args), nproc=nproc, strict=strict))


if __name__ == "__main__":  # pragma: no cover
    main()
