"""The ``npu-migrate`` command line (click).

``npu-migrate [PATH]...`` is a dry run that prints a diff; ``--write`` rewrites in
place; ``--check`` is the CI / pre-commit guard. ``npu-migrate rules [ID]``
documents the rules, ``npu-migrate explain FILE:LINE`` says which rules touch a
line and why, ``npu-migrate emulate SCRIPT`` runs a script on the
emulated NPU, ``npu-migrate launch ENTRY`` writes launchers and job specs, and
``npu-migrate preflight`` checks a training node.

The options are declared here; what the command does with them lives in
``npu_migrate/cli/command.py`` (and ``npu_migrate/cli/stdin.py`` for ``-``), the output
formats in ``npu_migrate/reporting/``.

This module must stay cheap to import: no torch, and libcst only once a file
actually needs parsing.
"""

from __future__ import annotations

import functools
import os
import signal
import sys

import click

from npu_migrate import __version__
from npu_migrate.cli.extras import EMULATE_NEEDS, missing_modules, needs_extra
from npu_migrate.cli.options import split_codes
from npu_migrate.verify.cli import verify_command

#: Output formats (``npu_migrate/reporting/``); listed here so that --help needs no import.
OUTPUT_FORMATS = ("text", "grouped", "json", "sarif", "github", "gitlab", "markdown")


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


#: True in the ``npu-migrate`` console process (see :func:`console`), never in a caller
#: that runs the click application in its own process (tests, an embedding tool).
_console_process = False


def _ignore_late_signals() -> None:
    """Once a run is over, SIGINT, SIGTERM and SIGHUP are ignored: the run's exit status
    stands. Without this, a signal landing while the interpreter finalises (which
    resets Python-level handlers to the default) killed the finished process by signal
    (-2) after its summary was printed. An ignored signal is not reset there."""
    from npu_migrate.pipeline import writer

    for signum in writer.ENDING_SIGNALS:
        try:
            signal.signal(signum, signal.SIG_IGN)
        except ValueError:  # not the main thread
            return


def console() -> None:
    """The ``npu-migrate`` console script and ``python -m npu_migrate``."""
    global _console_process
    _console_process = True
    main()


def _exits_on_interrupt(command):
    """Ctrl-C ends a run at once with exit 130 and one line saying how many files
    were written (none is written after it: see npu_migrate/pipeline/writer.py); a second
    Ctrl-C ends the process on the spot, whatever it is doing."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        from npu_migrate.pipeline import writer

        writer.written.clear()
        try:
            # SIGTERM and SIGHUP (a closed terminal) end the run as Ctrl-C does: the
            # workers killed, no temp file left, the same one line.
            for signum in writer.ENDING_SIGNALS[1:]:
                signal.signal(signum, writer.raise_terminated)
        except ValueError:  # not the main thread (an embedding caller): leave signals alone
            pass
        try:
            try:
                return command(*args, **kwargs)
            finally:
                if _console_process:
                    _ignore_late_signals()
        except KeyboardInterrupt as exc:
            # A second signal from here on ends the process with the same status. The
            # process then ends without interpreter finalisation, which would reset
            # SIGINT to its default, so that a second Ctrl-C arriving then killed the
            # process by signal (-2) instead; the workers are gone, nothing is pending.
            signum = exc.signum if isinstance(exc, writer.Terminated) else signal.SIGINT
            code = EXIT_INTERRUPTED if signum == signal.SIGINT else 128 + signum
            for ending in writer.ENDING_SIGNALS:
                signal.signal(ending, lambda signum, frame: os._exit(code))
            what = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
            click.echo(f"{what}: {len(writer.written)} file(s) written before the interrupt, none after it",
                       err=True)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    return run


class _DefaultToMigrate(click.Group):
    """``npu-migrate PATH...`` means ``npu-migrate migrate PATH...``; the ``migrate``
    name is internal and never shown (help, usage errors)."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--version", "-V", "-h", "--help")):
            args = ["migrate", *args]
        return super().parse_args(ctx, args)

    def format_help(self, ctx, formatter):
        migrate_cmd = self.commands["migrate"]
        with click.Context(migrate_cmd, info_name=ctx.info_name, parent=None) as sub:
            migrate_cmd.format_help(sub, formatter)


class _ToolContext(click.Context):
    """The migrate command's context: usage lines and errors say ``npu-migrate``."""

    @property
    def command_path(self) -> str:
        return self.parent.command_path if self.parent is not None else super().command_path


@click.group(cls=_DefaultToMigrate, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="npu-migrate")
def main() -> None:
    """Migrate CUDA PyTorch code to Ascend NPUs (torch_npu, HCCL)."""


def _codes(values: tuple[str, ...]) -> list[str] | None:
    return split_codes(values) if values else None


MIGRATE_EPILOG = """\b
Examples:
  npu-migrate src/                           dry run: the diff, then the findings and a summary
  npu-migrate src/ --write                   rewrite in place
  npu-migrate src/ --check                   CI / pre-commit: exit 1 if anything would change
  npu-migrate src/ --output-format sarif -o npu-migrate.sarif --exit-zero
  npu-migrate src/ --output-format github    annotations on a pull request (findings)
  npu-migrate - --stdin-filename train.py < train.py

\b
Exit codes:
  0  nothing to do, or done
  1  --check: files would change; --fail-on-findings: findings left (--exit-zero: 0)
  2  usage error, or a file could not be read, parsed or written

\b
Other commands:
  npu-migrate rules [ID|PREFIX|NAME]   document the rules
  npu-migrate explain FILE:LINE        which rules touched a line, and why
  npu-migrate emulate SCRIPT           run a migrated script on the emulated NPU
  npu-migrate verify SCRIPT -- ARGS    prove a migration step by step against a CPU twin
  npu-migrate launch ENTRY             write launchers and job specs
  npu-migrate preflight                check a training node
  npu-migrate diagnose LOG...          diagnose a failed job from its logs
"""


@main.command("migrate", epilog=MIGRATE_EPILOG)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--write", "--fix", "write", is_flag=True, help="Rewrite files in place (atomically). --fix is the same.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change.")
@click.option("--diff/--no-diff", default=None, help="Print a unified diff (default: on for a dry run).")
@click.option("--select", multiple=True, metavar="CODES", help="Rule ids or prefixes to run (comma-separated).")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Add to the selected rules.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rule ids or prefixes to skip (comma-separated).")
@click.option("--extend-ignore", multiple=True, metavar="CODES", help="Add to the ignored rules.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip paths matching GLOB (gitignore syntax); replaces the configured list.")
@click.option("--extend-exclude", multiple=True, metavar="GLOB", help="Add to the excluded paths.")
@click.option("--force-exclude/--no-force-exclude", default=None, help="Apply exclusions to files named on the command line too (pre-commit).")
@click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default="text", show_default=True, help="Report format.")
@click.option("--output-file", "-o", type=click.Path(), metavar="FILE", help="Write the report to FILE instead of the terminal.")
@click.option("--report", type=click.Path(), metavar="FILE", help="Also write the JSON report to FILE.")
@click.option("--fail-on-findings/--no-fail-on-findings", default=None, help="Exit 1 when findings are left for manual work.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when --check or --fail-on-findings would fail (errors still exit 2).")
@click.option("--statistics", is_flag=True, help="Count fixes and findings per rule instead of listing them.")
@click.option("--show-fixes", is_flag=True, help="List every fix too, not only the findings.")
@click.option("--annotate", is_flag=True, help="Add a '# npu-migrate: NPUxxx ...' comment above each finding.")
@click.option("--stdin-filename", metavar="PATH", help="With '-': the name of the file read from standard input.")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=0, help="Worker processes (default: CPU count).")
@click.option("--config", type=click.Path(dir_okay=False), help="Use this pyproject.toml instead of searching.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the cache (nor use what it holds).")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Cache directory (default: a per-project directory in ~/.cache/npu-migrate; see SECURITY.md).")
@click.option("--vendor-runtime", type=click.Path(file_okay=False), metavar="DIR",
              help="With --write: copy the npu_runtime package into DIR (skipped by later runs) instead of declaring npu-runtime.")
@click.option("--entry", "entries", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="A training entry point (repeatable; also [tool.npu-migrate] entry-points): NPU701 installs the runtime there.")
@click.option("--no-prefilter", is_flag=True, hidden=True, help="Parse every file (to verify the prefilter).")
@click.option("--isolated", is_flag=True, help="Ignore every configuration file (pyproject.toml).")
@click.option("--color", type=click.Choice(("auto", "always", "never")), default="auto", show_default=True,
              help="Colour the diff and the report (auto: on a terminal, unless NO_COLOR is set).")
@click.option("-q", "--quiet", count=True,
              help="As ruff's -q: print the findings and errors, nothing else (no diff, no summary). "
                   "-qq is -s.")
@click.option("-s", "--silent", is_flag=True, help="Print nothing; the exit code says how it went (also -qq).")
@click.option("-v", "--verbose", is_flag=True, help="Also print per-file status and timing.")
@_exits_on_interrupt
def migrate(paths, write, check, diff, select, extend_select, ignore, extend_ignore, exclude, extend_exclude,
            force_exclude, output_format, output_file, report, fail_on_findings, exit_zero, statistics, show_fixes,
            annotate, stdin_filename, jobs, config, no_cache, cache_dir, vendor_runtime, entries, no_prefilter, isolated, color,
            quiet, silent, verbose) -> None:
    """Migrate PATHS (files or directories; default: the current directory;
    '-': standard input, the migrated source to standard output).

    Without --write this is a dry run that prints the diff for review.
    """
    from npu_migrate.cli import command
    from npu_migrate.cli.options import Options

    if write and check:
        raise click.UsageError("--write and --check cannot be combined")
    silent = silent or quiet >= 2
    options = Options(
        paths=list(paths), mode="write" if write else "check" if check else "dry-run", diff=diff,
        select=_codes(select), extend_select=split_codes(extend_select), ignore=_codes(ignore),
        extend_ignore=split_codes(extend_ignore), exclude=list(exclude) or None, extend_exclude=list(extend_exclude),
        force_exclude=force_exclude, jobs=jobs, output_format=output_format, output_file=output_file, report=report,
        fail_on_findings=fail_on_findings, exit_zero=exit_zero, statistics=statistics, show_fixes=show_fixes,
        annotate=annotate, config=config, cache=not no_cache, cache_dir=cache_dir, vendor_runtime=vendor_runtime,
        entries=list(entries), prefilter=not no_prefilter, quiet=bool(quiet) or silent, silent=silent, verbose=verbose and not silent,
        stdin_filename=stdin_filename, isolated=isolated, color=color,
    )
    sys.exit(command.run(options))


migrate.context_class = _ToolContext


@main.command("rules", epilog="""\b
Examples:
  npu-migrate rules                       every rule, one line each
  npu-migrate rules NPU301                one rule's rationale and examples
  npu-migrate rules NPU3                  the rules whose id starts with NPU3
  npu-migrate rules torch-cuda-amp        a rule by name
  npu-migrate rules --output-format json  every rule as JSON (id, name, summary, ...)
""")
@click.argument("rule_id", metavar="[ID|PREFIX|NAME]", required=False)
@click.option("--output-format", type=click.Choice(("text", "json")), default="text", show_default=True)
def rules_command(rule_id: str | None, output_format: str) -> None:
    """List every rule, or show the rules matching an id, an id prefix or a name."""
    import json

    from rich.console import Console
    from rich.markdown import Markdown
    from rich.table import Table

    from npu_migrate.pipeline.registry import all_rules
    from npu_migrate.pipeline.rulebase import rule_doc

    console = Console(highlight=False)
    rules = all_rules()
    if rule_id is not None:
        key = rule_id.strip()
        exact = rules.get(key.upper()) or next((r for r in rules.values() if r.name == key.lower()), None)
        matched = {exact.id: exact} if exact is not None else {
            rid: r for rid, r in rules.items() if rid.startswith(key.upper()) or key.lower() in r.name}
        if not matched:
            raise click.BadParameter(f"no rule matches {rule_id!r}; run 'npu-migrate rules' for the list",
                                     param_hint="ID|PREFIX|NAME")
        rules = matched
    if output_format == "json":
        click.echo(json.dumps([{
            "id": rid, "name": r.name, "summary": r.summary, "fixable": r.fixable, "opt_in": r.opt_in,
            "rationale": r.rationale.strip(), "documentation": rule_doc(r),
        } for rid, r in rules.items()], indent=2))
        return
    if len(rules) == 1:
        doc = rule_doc(next(iter(rules.values())))
        console.print(Markdown(doc) if console.is_terminal else doc, soft_wrap=True, markup=False)
        return

    def summary(rule) -> str:
        return f"(opt-in: --extend-select {rule.id}) {rule.summary}" if rule.opt_in else rule.summary

    if not console.is_terminal:
        for rid, rule in rules.items():
            click.echo(f"{rid}  {rule.name:<32} {'fix' if rule.fixable else '   '}  {summary(rule)}")
        return
    table = Table("id", "name", "fix", "summary", box=None, show_edge=False)
    for rid, rule in rules.items():
        table.add_row(rid, rule.name, "yes" if rule.fixable else "-", summary(rule))
    console.print(table)


@main.command("explain")
@click.argument("location", metavar="FILE:LINE")
@click.option("--config", type=click.Path(dir_okay=False), help="Use this pyproject.toml instead of searching.")
def explain_command(location: str, config: str | None) -> None:
    """Print the rules that change or report a line, and why (nothing is written)."""
    from npu_migrate.cli.explain import ExplainError, explain, parse_location, render
    from npu_migrate.cli.options import Options
    from npu_migrate.cli.prepare import UsageError, prepare

    try:
        path, _ = parse_location(location)
        prep = prepare(Options(paths=[path], config=config))
        explained = explain(location, prep.settings)
    except (ExplainError, UsageError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    for line in render(explained):
        click.echo(line)


@main.command("emulate", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--nproc", type=click.IntRange(min=1), default=1, help="Processes (>1 runs torchrun with backend hccl).")
@click.option("--strict", is_flag=True, help="Reject float64 and ops Ascend lacks.")
@click.argument("script")  # a file, or a Python command on PATH (accelerate, torchrun)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def emulate_command(nproc: int, strict: bool, script: str, args: tuple[str, ...]) -> None:
    """Run SCRIPT with an emulated torch_npu (CPU-backed 'npu' device). Needs the [emulate] extra.

    SCRIPT may be a Python launcher on PATH: npu-migrate emulate accelerate launch train.py"""
    missing = missing_modules(EMULATE_NEEDS)
    if missing:
        needs_extra("emulate", missing)
    try:
        from npu_migrate.emulate.launcher import run as run_emulated
    except ImportError as exc:
        needs_extra("emulate", [exc.name or str(exc)])
    sys.exit(run_emulated(script, list(args), nproc=nproc, strict=strict))



def _env_pairs(values: tuple[str, ...]) -> dict[str, str] | None:
    if not values:
        return None
    pairs = {}
    for value in values:
        name, sep, setting = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{value!r} is not NAME=VALUE", param_hint="--env")
        pairs[name] = setting
    return pairs


class _Integer(click.ParamType):
    """An integer, else the text as given: ``npu-migrate launch`` says in one line what is wrong."""

    name = "integer"

    def convert(self, value, param, ctx):
        try:
            return int(value)
        except (TypeError, ValueError):
            return value


@main.command("launch")
@click.argument("entry", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("-t", "--target", "targets", multiple=True, metavar="TARGET",
              help="torchrun, torch-npu-run, ranktable, modelarts, volcano, ascendjob (repeat or comma-separate; "
                   "default torchrun).")
@click.option("--nodes", type=_Integer(), help="Servers in the job: 1 to 4096 (default 1).")
@click.option("--cards", type=_Integer(),
              help="NPUs per server: 1, 2, 4 or 8, or 16 on 16-NPU servers (Atlas 200T A2 Box16, Atlas A3), "
                   "at most what the --accelerator-type servers have (default 8).")
@click.option("--image", help="The training image (needed by volcano).")
@click.option("--out", metavar="DIR", help="Where to write, below the project root (default launch/).")
@click.option("--job-name", help="The Volcano Job's name (default: the project directory's name).")
@click.option("--namespace", help="The Volcano Job's namespace (default 'default').")
@click.option("--queue", help="The Volcano queue (default 'default').")
@click.option("--accelerator", help="The ring-controller.atlas label (default ascend-910b).")
@click.option("--npu-resource", help="The device plugin's NPU resource (default huawei.com/Ascend910).")
@click.option("--accelerator-type",
              help="The nodeSelector's accelerator-type label (default from --cards: module-910b-8, module-910b-16; "
                   "module with --accelerator ascend-910; Atlas A3: module-a3-16).")
@click.option("--host-arch", help="The nodeSelector's host-arch label: huawei-arm (default) or huawei-x86.")
@click.option("--driver-mounts", is_flag=True, default=None,
              help="Mount the host's driver and npu-smi into the pods (clusters without Ascend Docker Runtime).")
@click.option("--max-restarts", type=_Integer(), help="Restarts after a failure, by exit class (default 3).")
@click.option("--workdir", help="The project root inside the image (default /workspace).")
@click.option("--master-port", type=_Integer(), help="The rendezvous port (default 29500).")
@click.option("--python", "python_", metavar="PYTHON", help="The launchers' default interpreter (default python3).")
@click.option("--env", "env", multiple=True, metavar="NAME=VALUE", help="An extra variable the launchers export.")
@click.option("--write", is_flag=True, help="Write the files (atomically); without it, print their diffs.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change.")
@click.option("--config", type=click.Path(dir_okay=False), help="Use this pyproject.toml instead of searching.")
@click.option("-q", "--quiet", is_flag=True, help="Only print errors.")
def launch_command(entry, args, targets, nodes, cards, image, out, job_name, namespace, queue, accelerator,
                   npu_resource, accelerator_type, host_arch, driver_mounts, max_restarts, workdir, master_port,
                   python_, env, write, check, config, quiet) -> None:
    """Generate launchers and job specs for a migrated ENTRY script (and its ARGS, after --).

    Without --write this is a dry run that prints each file as a diff against what
    exists. Settings also come from [tool.npu-migrate.launch] in pyproject.toml.
    """
    from npu_migrate.launch.command import run as run_launch

    if write and check:
        raise click.UsageError("--write and --check cannot be combined")
    flags = {
        "entry": entry, "args": list(args) or None, "targets": split_codes(targets) or None, "nodes": nodes,
        "cards": cards, "image": image, "out": out, "job-name": job_name, "namespace": namespace, "queue": queue,
        "accelerator": accelerator, "npu-resource": npu_resource, "workdir": workdir, "master-port": master_port,
        "python": python_, "env": _env_pairs(env), "accelerator-type": accelerator_type, "host-arch": host_arch,
        "driver-mounts": driver_mounts, "max-restarts": max_restarts,
    }
    sys.exit(run_launch(flags, config=config, write=write, check=check, quiet=quiet))


@main.command("preflight", add_help_option=False,
              context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def preflight_command(args: tuple[str, ...]) -> None:
    """Check this training node before a job starts (the runtime's npu_runtime.preflight).

    The same program as 'python -m npu_runtime.preflight' (its --help lists the
    options: --nodes, --cards, --node-rank, --master ADDR:PORT, ...). One line per
    problem with its fix; exit 1 if any.
    """
    # The runtime copy npu-migrate bundles (npu_migrate/pipeline/runtime_bundle.py): the same
    # program, with no npu-runtime (or torch) installed next to the tool.
    from npu_migrate.cli.extras import runtime_program

    sys.exit(runtime_program("preflight", "preflight")(list(args), prog="npu-migrate preflight"))


@main.command("diagnose", add_help_option=False,
              context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def diagnose_command(args: tuple[str, ...]) -> None:
    """Diagnose a failed Ascend training job from its logs (the runtime's npu_runtime.diagnose).

    The same program as 'python -m npu_runtime.diagnose' (its --help lists the
    options): for each failure, the cause, file:line of the evidence, what it means,
    what to do and whether a restart can help, root cause first. Exit 1 if a failure
    was diagnosed, 0 if none, 2 for an unreadable log.
    """
    # The runtime copy npu-migrate bundles, as for preflight: diagnose needs neither torch nor
    # an installed npu-runtime, so it works after the light install (`pip install npu-migrate`).
    from npu_migrate.cli.extras import runtime_program

    sys.exit(runtime_program("diagnose", "diagnose")(list(args), prog="npu-migrate diagnose"))
main.add_command(verify_command)  # npu_migrate/verify/cli.py


if __name__ == "__main__":  # pragma: no cover
    main()
