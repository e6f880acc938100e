"""Memory per source line of the Python engine (issue 29: about 10 KB a line).

Each measurement runs in a fresh process: it imports the engine, records its
peak resident set size, migrates one generated file of N short lines (one CUDA
call per ten lines, so rules and edits run too), and prints the growth of the
peak, per line of the file.

    python bench/python_memory.py [LINES ...]     # default: 2000 10000 40000
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
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    result = migrate_source("big.py", data, Settings())
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"lines": lines + 1, "bytes": len(data), "seconds": round(took, 2), "error": result.error,
                      "fixes": len(result.fixes), "peak_growth_kb": after - before,
                      "kb_per_line": round((after - before) / (lines + 1), 2)}))
""")


def measure(lines: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(lines)], capture_output=True, text=True, timeout=1800,
                          check=False)
    if done.returncode != 0:
        return {"lines": lines, "error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}
    return json.loads(done.stdout.splitlines()[-1])


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [2000, 10000, 40000]
    print(f"{'lines':>8} {'bytes':>9} {'seconds':>8} {'peak growth KB':>15} {'KB/line':>8}")
    for lines in sizes:
        row = measure(lines)
        if "kb_per_line" not in row:
            print(f"{row['lines']:>8} failed: {row['error']}")
            continue
        print(f"{row['lines']:>8} {row['bytes']:>9} {row['seconds']:>8} {row['peak_growth_kb']:>15} {row['kb_per_line']:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
