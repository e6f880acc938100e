"""How long the emulated NPU's first build takes, and what makes it faster.

Each round builds the C++ extension from scratch (a fresh build directory, so
nothing is cached) in a fresh Python process, once per layout, interleaved so
that both layouts see the same machine load:

* ``one unit``: ``npu_emu.cpp``, which includes both parts (what ships);
* ``two units``: ``emu_device.cpp`` and ``emu_autocast.cpp`` compiled apart, in
  parallel by ninja (the layout before).

Reported per layout: the median wall time of the whole build as a user waits for
it (importing torch, compiling, linking, loading) and the median CPU time of
the compiler processes; with the load average, because on a shared machine the
wall time follows the load.

    python -m bench.emulator_build [--rounds 3] [--flags -O1 -g0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

LAYOUTS = {"one unit": ["npu_emu.cpp"], "two units": ["emu_device.cpp", "emu_autocast.cpp"]}

_CHILD = """
import json, resource, sys, time
start = time.monotonic()
from torch.utils import cpp_extension
from npu_migrate.emulate.build import CSRC_DIR, EXT_NAME
sources, flags, directory = json.loads(sys.argv[1])
cpp_extension.load(name=EXT_NAME, sources=[str(CSRC_DIR / s) for s in sources], build_directory=directory,
                   extra_cflags=flags, is_python_module=False, verbose=False)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": time.monotonic() - start, "compiler_cpu": usage.ru_utime + usage.ru_stime}))
"""


def build_once(sources: list[str], flags: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="npu-emu-bench-") as directory:
        load = os.getloadavg()[0]
        out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([sources, flags, directory])],
                             capture_output=True, text=True, check=True, timeout=1800)
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "load": load}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flags", nargs="*", default=["-O1", "-g0"])
    args = parser.parse_args(argv)
    runs: dict[str, list[dict]] = {name: [] for name in LAYOUTS}
    for round_ in range(args.rounds):
        for name, sources in LAYOUTS.items():
            run = build_once(sources, args.flags)
            runs[name].append(run)
            print(f"round {round_ + 1} {name}: wall {run['wall']:.1f} s, compiler CPU {run['compiler_cpu']:.1f} s, "
                  f"load {run['load']:.1f}", file=sys.stderr, flush=True)
    print("| layout | builds | median wall s | median compiler CPU s | load (1 min) |")
    print("| --- | --- | --- | --- | --- |")
    for name, results in runs.items():
        loads = [r["load"] for r in results]
        print(f"| {name} | {len(results)} | {statistics.median(r['wall'] for r in results):.1f} | "
              f"{statistics.median(r['compiler_cpu'] for r in results):.1f} | {min(loads):.1f}-{max(loads):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
