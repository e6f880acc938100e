"""``npu-migrate verify``'s options (click); what it does is npu_migrate/verify/command.py.

Imported by npu_migrate/cli/app.py, so it stays as cheap as that module: click only.
"""

from __future__ import annotations

import sys

import click

from npu_migrate.cli.options import split_codes


def _codes(values: tuple[str, ...]) -> list[str] | None:
    return split_codes(values) if values else None


@click.command("verify")
@click.option("--nproc", type=click.IntRange(min=1), default=1, help="Processes per twin (>1 runs torchrun).")
@click.option("--torchrun", is_flag=True, help="Start the twins with torchrun even for one process.")
@click.option("--spawns/--no-spawns", default=None,
              help="The script starts its own --nproc processes (torch.multiprocessing.spawn): run it as one "
                   "process. Default: detected in SCRIPT.")
@click.option("--jobs", type=click.IntRange(1, 2), default=None,
              help="2 (default): run the two twins at the same time; 1: one after the other. A fixed rendezvous "
                   "port the script sets is replaced by a free one per run.")
@click.option("--steps", type=click.IntRange(min=1), default=4, show_default=True, help="Optimizer steps to compare.")
@click.option("--report", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the JSON report to FILE, the summary (.txt) and the loss plot (.png) next to it.")
@click.option("--select", multiple=True, metavar="CODES", help="Rule ids or prefixes of the migration (as for migrate).")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Add to the selected rules.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rule ids or prefixes the migration skips.")
@click.option("--extend-ignore", multiple=True, metavar="CODES", help="Add to the ignored rules.")
@click.option("--config", type=click.Path(dir_okay=False), help="Use this pyproject.toml instead of searching.")
@click.option("--project", type=click.Path(file_okay=False), default=".", show_default=True,
              help="The project directory that is copied (ARGS are relative to the current directory inside it).")
@click.option("--resume/--no-resume", default=True, help="Also check a stop-and-restart round-trip (default: on).")
@click.option("--resume-arg", "resume_args", multiple=True, metavar="ARG",
              help="An argument added when the script is restarted (e.g. --resume-arg=--resume).")
@click.option("--reference", type=click.Choice(["original", "cpu-retarget"]), default="original", show_default=True,
              help="The reference twin: the unmigrated source on the same emulated NPU (CUDA served by it), or "
                   "the older CPU retarget (docs/verify.md).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for torch, random and numpy in both twins.")
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="Seconds per run.")
@click.option("--keep", is_flag=True, help="Keep the scratch copies and the run logs (their path is printed).")
@click.option("-q", "--quiet", is_flag=True, help="Print only the verdict's summary on failure.")
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def verify_command(nproc, torchrun, spawns, jobs, steps, report, select, extend_select, ignore, extend_ignore, config, project, resume,
                   resume_args, reference, seed, timeout, keep, quiet, script, args) -> None:
    """Prove a migration step by step, before writing it: run SCRIPT (with ARGS, after --)
    migrated and as it is (the reference), both on the emulated NPU, and compare losses,
    gradient norms, parameters and code paths per optimizer step. Exit 0 pass, 1 fail, 2 error. See docs/verify.md.
    """
    from npu_migrate.cli.extras import EMULATE_NEEDS, missing_modules, needs_extra
    from npu_migrate.verify import command as verify

    missing = missing_modules(EMULATE_NEEDS)
    if missing:  # the twins run torch: one line, not a traceback from the first twin
        needs_extra("verify", missing)

    sys.exit(verify.run(verify.Request(
        script=script, args=list(args), nproc=nproc, steps=steps, report=report, select=_codes(select),
        extend_select=split_codes(extend_select), ignore=_codes(ignore), extend_ignore=split_codes(extend_ignore),
        config=config, project=project, resume=resume, resume_args=list(resume_args), seed=seed, timeout=timeout,
        keep=keep, quiet=quiet, torchrun=torchrun, spawns=spawns, jobs=jobs, reference=reference)))
