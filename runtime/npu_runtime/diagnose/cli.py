"""Command line of ``python -m npu_runtime.diagnose`` and ``npu-migrate diagnose``.

Exit codes: 0 no failure found (warnings may be printed), 1 a failure was diagnosed,
2 bad options or a log that cannot be read (one line naming it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from .. import helpstyle
from .scan import Diagnosis, LogError, diagnose_paths
from .terminal import safe

EPILOG = """\
  Examples:
    python -m npu_runtime.diagnose rank0.log rank1.log
    python -m npu_runtime.diagnose ~/ascend/log/debug/plog
    kubectl logs job-worker-0 | python -m npu_runtime.diagnose -
    python -m npu_runtime.diagnose --output-format json train.log
    class=$(python -m npu_runtime.diagnose --exit-class node_0.log)   # in a launcher

  Exit codes:
    0  no failure found (warnings such as CPU fallbacks may still be printed)
    1  a failure was diagnosed (the first one printed is the root cause)
    2  bad options, or a log that cannot be read
"""


def parser(prog: str | None) -> argparse.ArgumentParser:
    p = helpstyle.parser(
        prog,
        "Diagnose a failed Ascend training job from its logs (CANN, HCCL, torch_npu, torch, npu_runtime): "
        "for each failure, the cause, where the evidence is, what it means, what to do, and whether an "
        "automatic restart can help. Root cause first.",
        EPILOG,
        arguments="LOG...",
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="a log file, a directory of logs (plog), or - for stdin")
    p.add_argument("--output-format", choices=("text", "json"), default="text",
                   help="text (default) or json: {\"diagnoses\": [...]}")
    p.add_argument("--exit-class", action="store_true",
                   help="for launchers: the report goes to stderr, and stdout gets only the root cause's "
                        "runtime exit class (75 hang, 76 health, 77 hardware, 78 fatal), or nothing when it has none")
    return p


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    args = parser(prog).parse_args(argv)
    _tolerant_streams()
    try:
        diagnoses = diagnose_paths(args.logs)
    except LogError as exc:
        print(f"{prog or 'diagnose'}: cannot read {safe(str(exc))}", file=sys.stderr)
        return 2
    try:
        return _report(args, diagnoses)
    except OSError as exc:  # `| head` closed the pipe, stdout on a full disk or closed (>&-)
        import contextlib
        import os

        with contextlib.suppress(OSError, ValueError, AttributeError):  # Python's flush at exit would fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        with contextlib.suppress(OSError, ValueError, AttributeError):
            print(f"{prog or 'diagnose'}: cannot write the report: {exc.strerror or exc}", file=sys.stderr)
        return 2


def _tolerant_streams() -> None:
    """A log's text shown on a terminal or pipe whose encoding cannot hold it (PYTHONIOENCODING=ascii,
    a Latin-1 locale, CJK driver messages) is escaped (backslashreplace), never a UnicodeEncodeError."""
    if sys.stderr is None:  # started with stderr closed (2>&-): print(file=None) would write to
        import os  # stdout, where --exit-class's launcher reads the class alone

        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the rest of the process
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream that cannot change (closed, or detached)
                pass


def _report(args: argparse.Namespace, diagnoses: list[Diagnosis]) -> int:
    if sys.stdout is None:  # started with stdout closed (>&-): print() would drop the report silently
        raise OSError("standard output is closed")
    report = sys.stderr if args.exit_class else sys.stdout
    try:
        if args.output_format == "json":
            json.dump({"diagnoses": [d.as_dict() for d in diagnoses]}, report, indent=2)
            report.write("\n")
        else:
            _print_text(diagnoses, report)
        if report is sys.stderr:
            report.flush()
    except OSError:
        if report is not sys.stderr:
            raise
        # --exit-class: the report on stderr is for people; the class on stdout is what the launcher reads
    if args.exit_class:
        root = next((d for d in diagnoses if d.signature.severity == "error"), None)
        if root is not None and root.signature.exit_class is not None:
            print(root.signature.exit_class)
    return 1 if any(d.signature.severity == "error" for d in diagnoses) else 0


def _print_text(diagnoses: list[Diagnosis], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if not diagnoses:
        _note("no known failure signature found")
        return
    for index, d in enumerate(diagnoses):
        s = d.signature
        restart = "restart can help" if s.restart else "do not restart as it is"
        root = " (root cause)" if index == 0 and s.severity == "error" else ""
        more = f", {d.count} lines" if d.count > 1 else ""
        print(f"{safe(d.file)}:{d.line}: {s.severity}: {s.cause}{root} [{s.id}; {restart}{more}]", file=out)
        print(f"    evidence: {safe(d.evidence)}", file=out)
        print(f"    meaning:  {s.meaning}", file=out)
        print(f"    action:   {s.action}", file=out)
        if d.also_in:
            print(f"    also in:  {safe(', '.join(d.also_in))}", file=out)
    failures = sum(1 for d in diagnoses if d.signature.severity == "error")
    _note(f"{failures} failure(s), {len(diagnoses) - failures} warning(s)")


def _note(text: str) -> None:
    """A line for people on stderr; a stderr that cannot be written (closed, a full disk) loses it alone."""
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass
