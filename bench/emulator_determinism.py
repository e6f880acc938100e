"""Runs the two-process GPT sampling script on the emulated NPU N times in a row and
reports whether every run gave the same losses and sampled tokens as the first, rank by
rank, and how long each took (issue 38, item 7: "20 runs in a row"; docs/emulator.md, "Determinism").

The slow test tests/emulator/test_emulator_determinism.py runs the same script three
times; this is the long measurement, kept out of the suite for its time (about 35 s a
run on an idle 2-core machine).

usage: python bench/emulator_determinism.py [--runs 20] [--steps 4] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "emulator" / "scripts" / "gpt_sample.py"


def one_run(steps: int, timeout: float) -> tuple[int, float, list[dict], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_MIGRATE_EMULATOR")}
    env.update({"NPU_MIGRATE_EMULATOR_DEVICES": "2", "GPT_SORTED_VOCAB": "0"})
    with tempfile.TemporaryDirectory(prefix="npu-det-") as out:
        cmd = [sys.executable, "-m", "npu_migrate.emulate", "--nproc", "1", str(SCRIPT),
               "--steps", str(steps), "--out", out]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return -1, time.perf_counter() - start, [], "timed out"
        wall = time.perf_counter() - start
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, wall, records, proc.stderr[-2000:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from npu_migrate.emulate.build import build

    build()
    reference = None
    rows = []
    for index in range(args.runs):
        code, wall, records, tail = one_run(args.steps, args.timeout)
        same = reference is None or records == reference
        if reference is None and code == 0:
            reference = records
        both = sorted(r.get("rank") for r in records) == [0, 1]
        rows.append({"run": index, "exit": code, "wall_s": round(wall, 1), "identical": same and code == 0 and both})
        print(f"run {index:2d}: exit {code}, {wall:5.1f} s, both ranks reported: {both}, "
              f"losses and tokens identical to run 0: {same and code == 0}", flush=True)
        if code != 0:
            print(tail, file=sys.stderr)
    failed = [r for r in rows if not r["identical"]]
    print(f"{len(rows) - len(failed)} of {len(rows)} runs exit 0 with both ranks' losses and tokens identical to "
          "the first run's (each rank samples with its own seed, so the two ranks' tokens differ by design)")
    if args.json:
        args.json.write_text(json.dumps({"runs": rows, "steps": args.steps}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
