"""``npu-migrate launch``: build the plan, render the targets, diff / check / write.

Exit codes as the rest of npu-migrate: 0 done (or nothing to do); 1 ``--check`` found
files that would change; 2 a usage or configuration error, or a file could not be
written (the others still are).
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from npu_migrate.cli import output
from npu_migrate.pipeline.config import ConfigError, load_config

from . import artifacts
from .plan import LaunchPlan, PlanError, build_plan

EXIT_OK, EXIT_PENDING, EXIT_ERROR = 0, 1, 2


def project_root(entry: str | None, config_root: Path, config_path: Path | None) -> Path:
    """The configured project's root; without a config, the current directory when it
    holds the entry script, else the entry script's directory."""
    if config_path is not None or entry is None:
        return config_root
    cwd = Path.cwd()
    entry_path = Path(entry).absolute()
    return cwd if entry_path.is_relative_to(cwd) else entry_path.parent


def run(flags: dict, *, config: str | None, write: bool, check: bool, quiet: bool) -> int:
    err = Console(stderr=True, highlight=False, markup=False, soft_wrap=True)
    out = Console(highlight=False, markup=False, soft_wrap=True)
    entry = flags.get("entry")
    try:
        cfg = load_config([entry] if entry else ["."], config)
    except ConfigError as exc:
        err.print(f"error: {exc}")
        return EXIT_ERROR
    table = dict(cfg.launch)
    if flags.get("env") is not None:  # --env adds to (and overrides) the configured env
        base = table.get("env", {})
        flags = {**flags, "env": {**(base if isinstance(base, dict) else {}), **flags["env"]}}
    try:
        plan = build_plan(table, flags, project_root(entry, cfg.root, cfg.path))
    except PlanError as exc:
        prefix = f"{_shown(cfg.path)}: " if cfg.path and cfg.launch and "[tool.npu-migrate.launch]" in str(exc) else ""
        err.print(f"error: {prefix}{exc}")
        return EXIT_ERROR

    from .targets import render

    try:
        planned, refused = artifacts.plan_writes(plan.root, render(plan))
    except artifacts.ArtifactError as exc:
        err.print(f"error: {exc}")
        return EXIT_ERROR
    pending = [p for p in planned if p.status != artifacts.UNCHANGED]
    failed = bool(refused)
    for refusal in refused:
        err.print(f"error: {refusal}")
    for p in planned:
        shown = _shown(p.target)
        if p.status == artifacts.UNCHANGED:
            continue
        if write:
            try:
                artifacts.write(p)
            except artifacts.ArtifactError as exc:
                err.print(f"error: {exc}")
                failed = True
                continue
            if not quiet:
                err.print(f"wrote {shown} ({p.status})")
        elif check:
            if not quiet:
                err.print(f"would {'create' if p.status == artifacts.NEW else 'update'}: {shown}")
        elif not quiet:
            output.print_diff(out, output.unified_diff(shown, p.old, p.artifact.data))
    if not quiet:
        _warn_unmigrated(err, plan)
        _warn_partial_servers(err, plan)
        _summary(err, plan, planned, pending, write, check)
    if failed:
        return EXIT_ERROR
    if check and pending:
        return EXIT_PENDING
    return EXIT_OK


def _shown(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)


def _warn_unmigrated(err: Console, plan: LaunchPlan) -> None:
    """Per-card ranktable mode relies on npu_runtime.install() in the entry (rule NPU701)."""
    if "ranktable" not in plan.targets:
        return
    try:
        text = (plan.root / plan.entry).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    if "npu_runtime" not in text:
        how = _install_advice(plan.root / plan.entry, text)
        err.print(f"warning: {plan.entry} does not use npu_runtime: the ranktable launcher needs "
                  f"npu_runtime.install() there to turn RANK_ID/RANK_SIZE into torch's variables ({how})")


def _warn_partial_servers(err: Console, plan: LaunchPlan) -> None:
    """A multi-node job whose pods take part of a server: some releases of Volcano's Ascend
    plugin refuse it on 910B servers too (on Atlas 800 training servers plan.py refuses it)."""
    from .plan import SCHEDULED_TARGETS, SERVER_NPUS

    whole = SERVER_NPUS.get(plan.accelerator_type)
    if plan.multi_node and whole and plan.cards < whole and any(t in plan.targets for t in SCHEDULED_TARGETS):
        err.print(f"warning: each of the {plan.nodes} pods asks for {plan.cards} of the {whole} NPUs of a "
                  f"{plan.accelerator_type} server; some releases of Volcano's Ascend plugin schedule a multi-node "
                  f"job only on whole servers (--cards {whole}), and HCCL links whole servers best")


def _install_advice(path: Path, text: str) -> str:
    """The command that adds npu_runtime.install() to ``path``, if NPU701 would really
    add it there once the file is named as an entry point; otherwise the lines to add."""
    from npu_migrate.pipeline.facts import ProjectFacts
    from npu_migrate.pipeline.settings import Settings
    from npu_migrate.python.engine import migrate_source

    entry = _shown(path)
    result = migrate_source(str(path), text.encode(), Settings(facts=ProjectFacts(entry_points=(str(path.absolute()),))))
    if any(fix.rule == "NPU701" for fix in result.fixes):
        return f"npu-migrate {entry} --entry {entry} --write adds it, rule NPU701"
    return ("add `import npu_runtime` and `npu_runtime.install()` as the first statement of its "
            "`if __name__ == \"__main__\":` block")


def _summary(err: Console, plan: LaunchPlan, planned, pending, write: bool, check: bool) -> None:
    new = sum(p.status == artifacts.NEW for p in pending)
    counts = f"{len(planned)} file(s) for {', '.join(plan.targets)}: {new} new, {len(pending) - new} changed, " \
             f"{len(planned) - len(pending)} unchanged"
    if write or not pending:
        err.print(f"launch: {counts}")
    elif check:
        err.print(f"launch: {counts}; run with --write to update them")
    else:
        err.print(f"launch: {counts}; nothing written (dry run), run again with --write to write them")
    if "modelarts" in plan.targets:
        from .targets.modelarts import boot_command

        err.print(f"ModelArts boot command: {boot_command(plan)}")
