"""``npu-migrate verify``'s options (click); what it does is npu_migrate/verify/command.py.

Imported by npu_migrate/cli/app.py, so it stays as cheap as that module: click only.
"""

from __future__ import annotations

import sys

import click

from npu_migrate.cli.options import split_codes


def _codes(values: tuple[str, ...]) -> list[str] | None:
    return split_codes(values) if values else None


#: Launchers a user may put before the script (``accelerate launch train.py``): verify
#: starts the script itself, so it says what to run instead (:func:`launcher_advice`).
LAUNCHERS = ("accelerate", "torchrun", "deepspeed", "python", "python3")


class _VerifyCommand(click.Command):
    """``npu-migrate verify accelerate launch --multi_gpu train.py``: the launcher's own
    options (``--multi_gpu``) would be taken as verify's; everything from the launcher on
    is read as the script and its arguments instead, as if ``--`` stood before it."""

    def parse_args(self, ctx, args):
        valued = {opt for param in self.params if isinstance(param, click.Option) and not param.is_flag
                  for opt in param.opts}
        for i, token in enumerate(args):
            if token == "--":
                break
            if token in LAUNCHERS and not (i and args[i - 1] in valued):
                ctx.meta["npu_migrate.verify_options"] = list(args[:i])  # for launcher_advice's command
                args = [*args[:i], "--", *args[i:]]
                break
        return super().parse_args(ctx, args)


def _value(args: list[str], names: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def launcher_advice(script: str, args: list[str], options: list[str] = ()) -> str | None:
    """One error paragraph for ``verify LAUNCHER ... SCRIPT ARGS``: the verify command that
    runs the same (verify starts ``python SCRIPT`` or torchrun itself; ``options``: verify's
    own, given before the launcher), or None where ``script`` is no launcher (or is a file
    of the project by that name)."""
    from pathlib import Path

    name = Path(script).name
    if name not in LAUNCHERS or Path(script).is_file() and name not in ("python", "python3"):
        return None
    rest = list(args)
    if name == "accelerate":
        if not rest or rest[0] != "launch":
            return "npu-migrate verify: error: verify runs training scripts; `accelerate` without `launch` is not one"
        rest = rest[1:]
    flags_without_value = {"--multi_gpu", "--cpu", "--use_deepspeed", "--use_fsdp", "-m", "--module",
                           "--standalone", "--no_python", "--debug", "-q", "--quiet"}
    target = None
    for i, arg in enumerate(rest):
        if arg.endswith(".py") and not arg.startswith("-"):
            target = i
            break
    if target is None:
        return (f"npu-migrate verify: error: verify starts the script itself; give it the script, not `{name}`: "
                "npu-migrate verify [--nproc N] SCRIPT -- ARGS")
    launcher_opts, script_path, script_args = rest[:target], rest[target], rest[target + 1:]
    nproc = None
    if name == "accelerate":
        nproc = _value(launcher_opts, ("--num_processes", "--num-processes"))
    elif name == "torchrun":
        nproc = _value(launcher_opts, ("--nproc-per-node", "--nproc_per_node"))
    elif name == "deepspeed":
        nproc = _value(launcher_opts, ("--num_gpus", "--num-gpus"))
    env = []
    precision = _value(launcher_opts, ("--mixed_precision", "--mixed-precision")) if name == "accelerate" else None
    if precision:
        env.append(f"ACCELERATE_MIXED_PRECISION={precision}")
    known = {"--num_processes", "--num-processes", "--nproc-per-node", "--nproc_per_node", "--num_gpus",
             "--num-gpus", "--mixed_precision", "--mixed-precision", "--multi_gpu", "--num_machines",
             "--main_process_port", "--master_port", "--master-port", "--standalone"}
    other = [a for a in launcher_opts if a.startswith("-") and a.split("=", 1)[0] not in known]
    if nproc is None and "--multi_gpu" in launcher_opts:
        nproc = "N"  # from the user's accelerate config: we do not read it
    command = " ".join([*env, "npu-migrate verify", *options,
                        *([f"--nproc {nproc}"] if nproc and nproc != "1" else []),
                        script_path, *(["--", *script_args] if script_args else [])])
    lines = [(f"npu-migrate verify: error: verify starts the script itself (`python SCRIPT`, or torchrun with "
              f"--nproc), not through `{name}{' launch' if name == 'accelerate' else ''}`; run instead:"),
             f"  {command}"]
    if name == "accelerate":
        lines.append("  (accelerate launch --multi_gpu starts torchrun, as --nproc does; its other options and its "
                     "config file reach the Accelerator as ACCELERATE_* environment variables that the launcher "
                     "sets: set those before verify, whose twins inherit its environment"
                     + ("; N: the number of processes your accelerate config gives" if nproc == "N" else "") + ")")
    if other and not set(other) <= flags_without_value:
        lines.append(f"  {name}'s options {' '.join(other)} are not translated: set them as the launcher would "
                     "(its environment variables or config file) before running verify")
    return "\n".join(lines)


@click.command("verify", cls=_VerifyCommand)
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
@click.option("--fork-server/--no-fork-server", default=None,
              help="Fork each twin's one-process runs from a process that imported torch once (default: on, "
                   "unless NPU_MIGRATE_FORK_SERVER=0); a run it cannot fork soundly starts fresh anyway.")
@click.option("--keep", is_flag=True, help="Keep the scratch copies and the run logs (their path is printed).")
@click.option("-q", "--quiet", is_flag=True, help="Print only the verdict's summary on failure.")
@click.argument("script", type=click.Path(dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def verify_command(nproc, torchrun, spawns, jobs, steps, report, select, extend_select, ignore, extend_ignore, config, project, resume,
                   resume_args, reference, seed, timeout, fork_server, keep, quiet, script, args) -> None:
    """Prove a migration step by step, before writing it: run SCRIPT (with ARGS, after --)
    migrated and as it is (the reference), both on the emulated NPU, and compare losses,
    gradient norms, parameters and code paths per optimizer step. Exit 0 pass, 1 fail, 2 error. See docs/verify.md.
    """
    advice = launcher_advice(script, list(args), click.get_current_context().meta.get("npu_migrate.verify_options", []))
    if advice is not None:
        click.echo(advice, err=True)
        sys.exit(2)
    from pathlib import Path

    if not Path(script).is_file():
        raise click.BadParameter(f"File '{script}' does not exist.", param_hint="'SCRIPT'")
    from npu_migrate.cli.extras import EMULATE_NEEDS, missing_modules, needs_extra
    from npu_migrate.verify import command as verify

    missing = missing_modules(EMULATE_NEEDS)
    if missing:  # the twins run torch: one line, not a traceback from the first twin
        needs_extra("verify", missing)

    sys.exit(verify.run(verify.Request(
        script=script, args=list(args), nproc=nproc, steps=steps, report=report, select=_codes(select),
        extend_select=split_codes(extend_select), ignore=_codes(ignore), extend_ignore=split_codes(extend_ignore),
        config=config, project=project, resume=resume, resume_args=list(resume_args), seed=seed, timeout=timeout,
        keep=keep, quiet=quiet, torchrun=torchrun, spawns=spawns, jobs=jobs, reference=reference,
        fork_server=fork_server)))
