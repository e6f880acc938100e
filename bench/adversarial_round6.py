"""Adversarial round 6 (issue 38): the emulator's repeated runs, the project root of a
lone file, and fresh attacks on what changed since round 5, each a bounded trial in its
own scratch directory under ``/tmp/h6/``.

    python bench/adversarial_round6.py                 # every case, a markdown table
    python bench/adversarial_round6.py -k emulator     # the cases whose name holds "emulator"
    python bench/adversarial_round6.py --list

Same conventions as bench/adversarial_round5.py (whose runner it reuses): a trial past
its time limit, a traceback, a differing run or a process left behind is *broke*.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import adversarial_round5 as r5

ROOT = r5.ROOT
BASE = Path("/tmp/h6")
MB = r5.MB
PY = r5.PY
RUNS = int(os.environ.get("H6_RUNS", "20"))

CASES: dict[str, Callable[[], tuple[bool, str]]] = {}
case = r5.registrar(CASES)


def scratch(name: str) -> Path:
    r5.BASE = BASE
    return r5.scratch(name)


# -------------------------------------------------------------------- the emulator (issue 38 items 6, 7)

@case(f"emulator: two-process GPT sampling (mp.spawn), {RUNS} runs in a row, identical, each exits 0")
def emulator_determinism(runs: int = RUNS) -> tuple[bool, str]:
    script = ROOT / "tests" / "emulator" / "scripts" / "gpt_sample.py"
    d = scratch("r-determinism")
    results, bad, times = [], [], []
    for i in range(runs):
        out = d / f"run{i}"
        out.mkdir()
        r = r5._emulated(script, ["--steps", "4", "--out", str(out)], 1,
                         {"NPU_MIGRATE_EMULATOR_DEVICES": "2", "GPT_SORTED_VOCAB": "0"}, 150)
        times.append(f"{r.seconds:.0f}")
        print(f"  determinism run {i}: exit {r.code} in {r.seconds:.0f}s", file=sys.stderr, flush=True)
        if r.code != 0:
            bad.append(f"run {i}: exit {r.code} after {r.seconds:.0f}s {r.out[-300:]!r}")
            continue
        lines = sorted(line for line in r.out.splitlines() if line.startswith("{"))
        if len(lines) != 2 or any(len(json.loads(x).get("tokens", [])) == 0 for x in lines):
            bad.append(f"run {i}: {len(lines)} rank records")
        results.append(lines)
    differ = [i for i, x in enumerate(results) if x != results[0]]
    return not bad and not differ, (f"{len(results)}/{runs} runs exited 0 (seconds {','.join(times)}), "
                                    f"{len(differ)} differ from the first {differ}; " + "; ".join(bad))


@case(f"emulator: a finished 2-rank torchrun DDP job exits, {RUNS} runs in a row")
def emulator_torchrun_exit(runs: int = RUNS) -> tuple[bool, str]:
    r5.BASE = BASE
    return r5.emulator_torchrun_exit(runs)


# -------------------------------------------------------------------- the engine: what changed since round 5

def _npu_migrate(args: list[str], cwd: Path, limit: float = 120) -> r5.Run:
    return r5.run([PY, "-m", "npu_migrate", *args, "--no-cache", "--quiet"], cwd, limit)


def _one_line_or_result(r: r5.Run, limit: float = 60) -> bool:
    return r.code is not None and r.code in (0, 1, 2) and r5.no_traceback(r) and r.seconds < limit


@case("a file directly in a folder with no project marker, beside 20,000 files in 4,000 subfolders")
def lone_file() -> tuple[bool, str]:
    d = scratch("lone")
    for i in range(4000):
        sub = d / f"d{i // 100}" / f"e{i % 100}"
        sub.mkdir(parents=True)
        for name in ("a.py", "b.py", "c.sh", "d.yaml", "e.py"):
            (sub / name).write_text("import torch\nx = torch.cuda.is_available()\n")
    (d / "x.py").write_text("import torch\nmodel = model.cuda()\n")
    r = _npu_migrate(["x.py"], d, 120)
    s = r5.run([PY, "-m", "npu_migrate", "-", "--stdin-filename", "x.py", "--no-cache"], d, 120,
               stdin=(d / "x.py").read_bytes())
    ok = _one_line_or_result(r, 10) and _one_line_or_result(s, 10)
    return ok, f"file: exit {r.code} in {r.seconds:.1f}s; stdin: exit {s.code} in {s.seconds:.1f}s"


@case("requirements.txt of 1,990 torch pins, each with its own markers (NPU850)")
def npu850_markers() -> tuple[bool, str]:
    d = scratch("npu850")
    (d / "requirements.txt").write_bytes(b"".join(b'torch==2.1.0 ; python_version > "3.%d"\n' % i
                                                  for i in range(1990)))
    r = _npu_migrate(["requirements.txt"], d)
    return _one_line_or_result(r, 20), f"exit {r.code} in {r.seconds:.1f}s"


def _template(unit: bytes, size: int) -> bytes:
    return b"#!/bin/bash\n" + unit * (size // len(unit))


@case("shell templates: placeholder lines (`P=<ROOT>`) before commands, 40 KB / 330 KB / 2 MB")
def shell_templates() -> tuple[bool, str]:
    d = scratch("templates")
    notes, bad = [], []
    for unit in (b"P=<ROOT>\nexport CUDA_VISIBLE_DEVICES=0,1\n", b"P=<R>\n\nexport CUDA_VISIBLE_DEVICES=0\n"):
        for size in (40_000, 330_000, 2_000_000):
            (d / "run.sh").write_bytes(_template(unit, size))
            r = _npu_migrate(["run.sh"], d)
            notes.append(f"{size // 1000} KB: exit {r.code} {r.seconds:.0f}s")
            if not _one_line_or_result(r):
                bad.append(notes[-1])
    return not bad, "; ".join(notes)


@case("NVIDIA network profile scan: 2 MB shell script / Dockerfile of NCCL variables, the profile line last")
def network_profile() -> tuple[bool, str]:
    d = scratch("profile")
    notes, bad = [], []
    files = {
        "run.sh": b"#!/bin/bash\n" + b"NCCL_SOCKET_IFNAME=eth0 NCCL_IB_HCA=mlx5 torchrun train.py\n" * 33000
                  + b"export NCCL_NET_PLUGIN=/usr/lib/libnccl-net.so\n",
        "Dockerfile": b"FROM x\n" + b"RUN NCCL_SOCKET_IFNAME=eth0 NCCL_IB_HCA=mlx5 torchrun train.py\n" * 30000
                      + b"ENV NCCL_NET_PLUGIN=/usr/lib/libnccl-net.so\n",
        "lib.sh": b"#!/bin/bash\n" + b"export NCCL_FASTRAK_" + b"A" * 1_900_000 + b"=1\nexport NCCL_DEBUG=INFO\n",
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
        r = _npu_migrate([name], d)
        notes.append(f"{name}: exit {r.code} {r.seconds:.0f}s")
        if not _one_line_or_result(r):
            bad.append(notes[-1])
    return not bad, "; ".join(notes)


@case("Python 1 MB: comments above device tests (30,000 comment lines; a statement of 5,000 edits under them)")
def comments_above() -> tuple[bool, str]:
    d = scratch("comments")
    notes, bad = [], []
    texts = {
        "a.py": "import torch\n" + "# this block requires CUDA, see NVDEC\n" * 25000
                + "if torch.cuda.is_available():\n    x = 1\n",
        "b.py": "import torch\n" + "# requires CUDA only\n" * 20000
                + "xs = [" + "t.cuda(), " * 5000 + "]\n",
        "c.py": "import torch\n" + ("# requires CUDA\nif torch.cuda.is_available():\n    y = 2\n") * 12000,
        "d.py": "import torch\n" + "if " + " and ".join(f"a{i}.is_cuda" for i in range(6000)) + ":\n"
                + "    z = 1\n" * 20000,
    }
    for name, text in texts.items():
        (d / name).write_text(text[: 1 << 20] if len(text) > 1 << 20 else text)
        r = _npu_migrate([name], d)
        notes.append(f"{name} {len(text) >> 10} KB: exit {r.code} {r.seconds:.0f}s")
        if not _one_line_or_result(r):
            bad.append(notes[-1])
    return not bad, "; ".join(notes)


@case("Python 1 MB: kernel-module and feature-name checks (a package module named for fp8 kernels)")
def kernel_modules() -> tuple[bool, str]:
    d = scratch("kernels")
    pkg = d / "proj" / ("fp8_" * 60 + "kernels")
    pkg.mkdir(parents=True)
    (d / "proj" / "pyproject.toml").write_text("[project]\nname='p'\nversion='0'\n")
    (d / "proj" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    notes, bad = [], []
    texts = {
        "triton_ops.py": "import triton\nimport torch\n" + "@triton.jit\ndef k(x):\n    pass\n" * 20000
                         + "y = torch.zeros(1).cuda()\n",
        "fp8_utils.py": "import torch\n" + "x = torch.zeros(1).cuda()  # loss.backward() optimizer.step()\n" * 16000,
        "kernels_" + "a" * 200 + ".py": "import torch\n" + ("from " + "a." * 400 + "b import c\n") * 1200
                                        + "torch.zeros(1).cuda()\n",
    }
    for name, text in texts.items():
        (pkg / name).write_text(text[: 1 << 20])
        r = _npu_migrate([str(pkg / name)], d)
        notes.append(f"{name[:20]} {len(text) >> 10} KB: exit {r.code} {r.seconds:.0f}s")
        if not _one_line_or_result(r):
            bad.append(notes[-1])
    return not bad, "; ".join(notes)


@case("JSON configs with errors on every line (a template's `<X>`), 1 MB and 30 MB; a 95 MB notebook")
def json_errors() -> tuple[bool, str]:
    d = scratch("json")
    notes, bad = [], []
    unit = b'{"a": <X>, "device": "cuda", "backend": "nccl"}\n'
    for name, size in (("ds_config.json", 1 << 20), ("big.json", 30 << 20)):
        (d / name).write_bytes(unit * (size // len(unit)))
        r = _npu_migrate([name], d)
        notes.append(f"{name}: exit {r.code} {r.seconds:.0f}s")
        if not _one_line_or_result(r):
            bad.append(notes[-1])
    cell = ('{"cell_type": "code", "metadata": {}, "execution_count": 1, "source": ["x = torch.zeros(1).cuda()\\n"], '
            '"outputs": [{"output_type": "stream", "name": "stdout", "text": [' + ", ".join(
                f'"step {i} loss 0.5\\n"' for i in range(2000)) + ']}]}')
    nb = '{"cells": [' + ", ".join([cell] * 1800) + '], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    (d / "train.ipynb").write_text(nb)
    r = _npu_migrate(["train.ipynb"], d, 180)
    notes.append(f"train.ipynb {len(nb) >> 20} MB: exit {r.code} {r.seconds:.0f}s {r.out[-120:]!r}")
    if not _one_line_or_result(r, 120):
        bad.append(notes[-1])
    return not bad, "; ".join(notes)


def main(argv: list[str] | None = None) -> int:
    return r5.main(argv, CASES, BASE, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
