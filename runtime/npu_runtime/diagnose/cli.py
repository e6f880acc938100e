"""Command line of ``python -m npu_runtime.diagnose`` and ``npu-migrate diagnose``.

Exit codes: 0 no failure found (warnings may be printed), 1 a failure was diagnosed,
2 bad options or a log that cannot be read (one line naming it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .. import helpstyle
from .scan import Diagnosis, LogError, diagnose_paths

EPILOG = """\
  Examples:
    python -m npu_runtime.diagnose rank0.log rank1.log
    python -m npu_runtime.diagnose ~/ascend/log/debug/plog
    kubectl logs job-worker-0 | python -m npu_runtime.diagnose -
    python -m npu_runtime.diagnose --output-format json train.log

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
    return p


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    args = parser(prog).parse_args(argv)
    try:
        diagnoses = diagnose_paths(args.logs)
    except LogError as exc:
        print(f"{prog or 'diagnose'}: cannot read {exc}", file=sys.stderr)
        return 2
    if args.output_format == "json":
        json.dump({"diagnoses": [d.as_dict() for d in diagnoses]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_text(diagnoses)
    return 1 if any(d.signature.severity == "error" for d in diagnoses) else 0


def _print_text(diagnoses: list[Diagnosis]) -> None:
    if not diagnoses:
        print("no known failure signature found", file=sys.stderr)
        return
    for index, d in enumerate(diagnoses):
        s = d.signature
        restart = "restart can help" if s.restart else "do not restart as it is"
        root = " (root cause)" if index == 0 and s.severity == "error" else ""
        more = f", {d.count} lines" if d.count > 1 else ""
        print(f"{d.file}:{d.line}: {s.severity}: {s.cause}{root} [{s.id}; {restart}{more}]")
        print(f"    evidence: {d.evidence}")
        print(f"    meaning:  {s.meaning}")
        print(f"    action:   {s.action}")
        if d.also_in:
            print(f"    also in:  {', '.join(d.also_in)}")
    failures = sum(1 for d in diagnoses if d.signature.severity == "error")
    print(f"{failures} failure(s), {len(diagnoses) - failures} warning(s)", file=sys.stderr)
