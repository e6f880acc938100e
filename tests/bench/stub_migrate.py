"""A tiny stand-in for the npu-migrate CLI, used to test the bench harness itself.

It follows the CLI contract (paths, --write, --check, --report, exit codes) with
two regex rewrites and one finding, so that the harness's accounting can be
checked against known answers. Env switches make it misbehave on purpose:
STUB_NOT_IDEMPOTENT, STUB_BREAK_SYNTAX, STUB_BROKEN_PREFILTER.
"""

import argparse
import json
import os
import re
import sys
from pathlib import Path


def discover(paths):
    for p in map(Path, paths or ["."]):
        if p.is_dir():
            yield from sorted(q for q in p.rglob("*.py") if q.is_file())
        else:
            yield p


def migrate(text):
    fixes, findings = [], []
    out_lines = []
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        if "torch.cuda." in line:
            fixes.append({"rule": "NPU101", "start": {"line": n, "column": line.index("torch.cuda.") + 1}, "message": "torch.cuda"})
            line = line.replace("torch.cuda.", "torch.npu.")
        if ".cuda(" in line:
            fixes.append({"rule": "NPU110", "start": {"line": n, "column": line.index(".cuda(") + 1}, "message": ".cuda()"})
            line = line.replace(".cuda(", ".npu(")
        if '"cuda:0"' in line:
            fixes.append({"rule": "NPU120", "start": {"line": n, "column": line.index('"cuda:0"') + 1}, "message": "device"})
            line = line.replace('"cuda:0"', '"npu:0"')
        if '"nccl"' in line:
            findings.append({"rule": "NPU900", "start": {"line": n, "column": line.index('"nccl"') + 1}, "message": "nccl",
                             "suggestion": "hccl"})
        out_lines.append(line)
    out = "".join(out_lines)
    if os.environ.get("STUB_NOT_IDEMPOTENT"):
        out += "# touched\n"
    if os.environ.get("STUB_BREAK_SYNTAX") and out != text:
        out += "(\n"
    return out, fixes, findings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--diff", action="store_true")
    ap.add_argument("--no-diff", action="store_true")
    ap.add_argument("--report")
    ap.add_argument("--jobs", "-j", type=int, default=0)
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--cache-dir")
    ap.add_argument("--no-prefilter", action="store_true")
    ap.add_argument("-q", action="store_true")
    args = ap.parse_args()
    word = re.compile(r"cuda" if os.environ.get("STUB_BROKEN_PREFILTER") else r"cuda|nccl")
    files, any_changed, any_error = [], False, False
    for path in discover(args.paths):
        entry = {"path": str(path), "changed": False, "error": None, "fixes": [], "findings": []}
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            entry["error"] = str(exc)
            any_error = True
            files.append(entry)
            continue
        if args.no_prefilter or word.search(text):
            out, entry["fixes"], entry["findings"] = migrate(text)
            entry["changed"] = out != text
            if entry["changed"]:
                any_changed = True
                if args.write:
                    path.write_text(out, encoding="utf-8")
        files.append(entry)
    if args.report:
        Path(args.report).write_text(json.dumps({"version": "stub", "files": files, "summary": {}}))
    if any_error:
        return 2
    return 1 if args.check and any_changed else 0


if __name__ == "__main__":
    sys.exit(main())
