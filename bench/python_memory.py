"""Memory per source line of the Python engine (issue 29: about 10 KB a line).

Each measurement runs in a fresh process: it imports the engine, records its
peak resident set size, migrates one generated file of N short lines (one CUDA
call per ten lines, so rules and edits run too), and prints the growth of the
peak, per line of the file.

    python bench/python_memory.py [LINES ...]     # default: 2000 10000 40000

Beside the engine, two floors for the same file: libcst's parse alone, and the
parse with a ``MetadataWrapper`` (which deep-copies the tree unless told not to).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from npu_migrate.python.engine import migrate_source
    from npu_migrate.pipeline.settings import Settings
    migrate_source("warm.py", b"import torch\\ntorch.cuda.synchronize()\\n", Settings())
    lines = int(sys.argv[1])
    body = "".join("torch.cuda.synchronize()\\n" if i % 10 == 0 else f"x{i} = {i}\\n" for i in range(lines))
    data = ("import torch\\n" + body).encode()
    import libcst as cst
    from libcst.metadata import MetadataWrapper
    what = sys.argv[2]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    error = None
    if what == "engine":
        result = migrate_source("big.py", data, Settings())
        error = result.error
    elif what == "parse":  # the floor: libcst's tree of the file, nothing else
        module = cst.parse_module(data)
    elif what == "parse+wrapper":  # the tree and MetadataWrapper's deep copy of it (its default)
        module = cst.parse_module(data)
        wrapper = MetadataWrapper(module)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"lines": lines + 1, "bytes": len(data), "seconds": round(took, 2), "error": error,
                      "peak_growth_kb": after - before, "kb_per_line": round((after - before) / (lines + 1), 2)}))
""")
#: What is measured: the engine, and libcst alone (the floor the engine cannot go below).
WHAT = ("parse", "parse+wrapper", "engine")


def measure(lines: int, what: str = "engine") -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(lines), what], capture_output=True, text=True,
                          timeout=1800, check=False)
    if done.returncode != 0:
        return {"lines": lines, "error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}
    return json.loads(done.stdout.splitlines()[-1])


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [2000, 10000, 40000]
    print(f"{'lines':>8} {'bytes':>9} {'measured':>14} {'seconds':>8} {'peak growth KB':>15} {'KB/line':>8}")
    for lines in sizes:
        for what in WHAT:
            row = measure(lines, what)
            if "kb_per_line" not in row:
                print(f"{row['lines']:>8} {'':>9} {what:>14} failed: {row['error']}")
                continue
            print(f"{row['lines']:>8} {row['bytes']:>9} {what:>14} {row['seconds']:>8} {row['peak_growth_kb']:>15} "
                  f"{row['kb_per_line']:>8}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
