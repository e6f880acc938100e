"""Time per cell of a notebook, dry run and ``--write`` (issue 29: 1000 cells took
10 s, 2000 cells 29 s: quadratic). Each size is a generated notebook whose every
code cell holds a little CUDA code (``x = x.cuda()``), migrated by the command
line with ``--no-cache`` in a fresh process; the time per cell should stay flat.

    python bench/notebook_growth.py [CELLS ...]      # default: 500 1000 2000 4000

Prints one row per size and the load average (the machine is shared: compare
rows of one run, not runs on different days).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import npu_migrate_cmd


def notebook(cells: int) -> bytes:
    sources = [["import torch\n", "x = torch.zeros(1)\n", "x = x.cuda()\n"]]
    sources += [[f"x = torch.zeros({i})\n", "x = x.cuda()\n"] for i in range(1, cells)]
    return json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                   "source": source} for i, source in enumerate(sources)],
        "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
        "nbformat": 4, "nbformat_minor": 5}, indent=1).encode()


def timed(args: list[str], cwd: str) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run([*npu_migrate_cmd(), "--no-cache", *args], cwd=cwd, capture_output=True, timeout=3600,
                          check=False)
    return time.perf_counter() - start, done.returncode


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [500, 1000, 2000, 4000]
    print(f"{'cells':>6} {'bytes':>9} {'dry s':>7} {'ms/cell':>8} {'write s':>8} {'ms/cell':>8} {'load':>5}")
    for cells in sizes:
        directory = tempfile.mkdtemp(prefix="npu-nb-growth-")
        try:
            path = Path(directory, "big.ipynb")
            path.write_bytes(notebook(cells))
            dry, dry_rc = timed([path.name], directory)
            write, write_rc = timed(["--write", path.name], directory)
            changed = b".npu()" in path.read_bytes()
            note = "" if dry_rc == 0 and write_rc == 0 and changed else f"  (exit {dry_rc}/{write_rc}, written {changed})"
            print(f"{cells:>6} {path.stat().st_size:>9} {dry:>7.1f} {1000 * dry / cells:>8.1f} {write:>8.1f} "
                  f"{1000 * write / cells:>8.1f} {os.getloadavg()[0]:>5.1f}{note}", flush=True)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
