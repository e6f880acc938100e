"""The engine/CLI cases of the adversarial rounds (issues 29 and 30), re-run as
bounded trials: every trial is one ``npu-migrate`` process in a fresh temporary
directory, killed at its time limit; it *held* when the outcome is the safe one
(one ``error:`` line naming the file and exit 2, or the honest result), and
*broke* otherwise (a hang, a traceback, code or files where they must not be).

    python bench/adversarial_cli.py            # prints the table (markdown)
    python bench/adversarial_cli.py -k cache   # only the cases whose name has "cache"

The runtime's and the launcher's cases are run by their own scripts.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CUDA_PY = b"import torch\nn = torch.cuda.device_count()\n"
WORD = "CUDA_VISIBLE_DEVICES=0 torch.cuda nccl cuda"
EVIL = "import os\nos.system('touch PWNED')\n"


@dataclass
class Outcome:
    code: int | None  # None: killed at the time limit
    out: str
    seconds: float


def npu_migrate(args: list[str], cwd: Path, timeout: float, env: dict | None = None,
                memory_bytes: int | None = None) -> Outcome:
    def limit():
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "npu_migrate", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})}, preexec_fn=limit, check=False)
        return Outcome(done.returncode, done.stdout + done.stderr, time.perf_counter() - start)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
        return Outcome(None, out, time.perf_counter() - start)


def one_clean_error(outcome: Outcome, name: str) -> tuple[bool, str]:
    errors = [line for line in outcome.out.splitlines() if line.startswith("error:")]
    if outcome.code is None:
        return False, f"no answer in {outcome.seconds:.0f}s"
    if "Traceback" in outcome.out:
        return False, "traceback"
    ok = outcome.code == 2 and len(errors) == 1 and name in errors[0]
    return ok, f"exit {outcome.code} in {outcome.seconds:.1f}s: {errors[0][:90] if errors else outcome.out[-90:]!r}"


# --------------------------------------------------------------------------- cases

def deep_case(filename: str, text: str, limit: float = 60) -> Callable[[Path], tuple[bool, str]]:
    def trial(root: Path) -> tuple[bool, str]:
        (root / filename).write_text(text)
        (root / "good.py").write_bytes(CUDA_PY)
        outcome = npu_migrate(["--write", "--no-cache", "."], root, limit)
        held, note = one_clean_error(outcome, filename)
        return held and b"torch.npu" in (root / "good.py").read_bytes(), note

    return trial


def deep_config(root: Path) -> tuple[bool, str]:
    (root / "pyproject.toml").write_text("[tool.x]\ny = " + "[" * 50_000 + "]" * 50_000 + "\n")
    (root / "a.py").write_bytes(CUDA_PY)
    outcome = npu_migrate(["--no-cache", "."], root, 60)
    return one_clean_error(outcome, "pyproject.toml")


def alias_bomb(levels: int):
    def trial(root: Path) -> tuple[bool, str]:
        lines = ['a0: &a0 ["cuda", "nccl", "cuda", "nccl", "cuda", "nccl", "cuda", "nccl", "cuda"]']
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
        (root / "bomb.yaml").write_text("\n".join(lines) + "\ndevice: cuda\n")
        outcome = npu_migrate(["--no-cache", "."], root, 60)
        return outcome.code is not None and "Traceback" not in outcome.out and outcome.seconds < 20, \
            f"exit {outcome.code} in {outcome.seconds:.1f}s"

    return trial


def write_vs_dry(filename: str, data: bytes):
    def trial(root: Path) -> tuple[bool, str]:
        path = root / filename
        path.write_bytes(data)
        dry = npu_migrate(["--no-cache", "-q", "--no-diff", "."], root, 300)
        written = npu_migrate(["--no-cache", "-q", "--write", "."], root, 300)
        if dry.code is None or written.code is None:
            return False, "no answer in 300s"
        return written.seconds < 2 * dry.seconds + 10 and written.code == 0, \
            f"dry {dry.seconds:.1f}s, --write {written.seconds:.1f}s"

    return trial


def _poison(directory: Path, attacker_key: bytes) -> int:
    from npu_migrate.pipeline.cache import _MAC_SIZE, _MAGIC

    count = 0
    for entry in directory.rglob("*"):
        if not entry.is_file() or entry.name in (".gitignore", "key"):
            continue
        raw = entry.read_bytes()
        if raw.startswith(b"{"):
            data = json.loads(raw)
            data["new_source"] = EVIL
            entry.write_text(json.dumps(data))
        else:
            data = json.loads(zlib.decompress(raw[len(_MAGIC) + _MAC_SIZE:]))
            data["new_source"] = EVIL
            payload = zlib.compress(json.dumps(data).encode())
            mac = hmac.new(attacker_key, entry.stem.encode() + b"\0" + payload, hashlib.sha256).digest()
            entry.write_bytes(_MAGIC + mac + payload)
        count += 1
    return count


def cache_shipped(root: Path) -> tuple[bool, str]:
    """(A) A repository ships a cache whose entries hold attacker code."""
    repo = root / "repo"
    repo.mkdir()
    (repo / "train.py").write_bytes(CUDA_PY)
    (repo / "pyproject.toml").write_bytes(b"[tool.npu-migrate]\n")
    attacker = {"XDG_CACHE_HOME": str(root / "attacker")}
    npu_migrate(["--cache-dir", ".npu_migrate_cache", "."], repo, 60, attacker)
    key = (root / "attacker" / "npu-migrate" / "key").read_bytes()
    _poison(repo / ".npu_migrate_cache", key)
    victim = {"XDG_CACHE_HOME": str(root / "victim")}
    notes = []
    held = True
    for extra in ([], ["--cache-dir", ".npu_migrate_cache"]):
        outcome = npu_migrate(["--write", *extra, "."], repo, 60, victim)
        text = (repo / "train.py").read_bytes()
        held &= b"os.system" not in text and b"torch.npu" in text
        notes.append(f"{' '.join(extra) or 'default'}: {'honest' if b'os.system' not in text else 'INJECTED'}")
        (repo / "train.py").write_bytes(CUDA_PY)
    return held, "; ".join(notes)


def cache_shared_dir(root: Path) -> tuple[bool, str]:
    """(B) A world-writable working directory with a planted cache and .gitignore link."""
    shared = root / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "train.py").write_bytes(CUDA_PY)
    planted = shared / ".npu_migrate_cache"
    planted.mkdir()
    planted.chmod(0o777)
    target = root / "victim-file"
    (planted / ".gitignore").symlink_to(target)
    env = {"XDG_CACHE_HOME": str(root / "victim")}
    npu_migrate(["."], shared, 60, env)
    _poison(planted, os.urandom(32))
    _poison(root / "victim", os.urandom(32))
    outcome = npu_migrate(["--write", "."], shared, 60, env)
    text = (shared / "train.py").read_bytes()
    held = not target.exists() and b"os.system" not in text and b"torch.npu" in text
    return held, f"link followed: {target.exists()}, code injected: {b'os.system' in text}, exit {outcome.code}"


def symlink_out(root: Path) -> tuple[bool, str]:
    home = root / "home"
    home.mkdir()
    (home / "tool.py").write_bytes(CUDA_PY)
    repo = root / "repo"
    (repo / "launch").mkdir(parents=True)
    (repo / "launch" / "tool.py").symlink_to("../../home/tool.py")
    outcome = npu_migrate(["--write", "--no-cache", "launch/tool.py"], repo, 60)
    held, note = one_clean_error(outcome, "launch/tool.py")
    return held and (home / "tool.py").read_bytes() == CUDA_PY, note


def hard_link(root: Path) -> tuple[bool, str]:
    (root / "a.py").write_bytes(CUDA_PY)
    os.link(root / "a.py", root / "b.py")
    outcome = npu_migrate(["--write", "--no-cache", "."], root, 60)
    held, note = one_clean_error(outcome, ".py")
    return held and os.path.samefile(root / "a.py", root / "b.py"), note


def requirements(data: bytes):
    def trial(root: Path) -> tuple[bool, str]:
        (root / "requirements.txt").write_bytes(data)
        outcome = npu_migrate(["--write", "--no-cache", "."], root, 60)
        return b"torch-npu" in (root / "requirements.txt").read_bytes(), f"exit {outcome.code}"

    return trial


def jobs_nan(root: Path) -> tuple[bool, str]:
    outcome = npu_migrate(["--jobs", "nan", "."], root, 60)
    return outcome.code == 2 and "Traceback" not in outcome.out, f"exit {outcome.code}"


def memory_cap(root: Path) -> tuple[bool, str]:
    (root / "big.py").write_text("import torch\n" + "".join(f"x{i} = {i}\n" for i in range(200_000)) + "torch.cuda.synchronize()\n")
    outcome = npu_migrate(["--no-cache", "-j", "1", "big.py"], root, 300, memory_bytes=700 << 20)
    ok = outcome.code == 2 and "out of memory" in outcome.out and "Traceback" not in outcome.out
    return ok, f"exit {outcome.code} in {outcome.seconds:.0f}s: {[l for l in outcome.out.splitlines() if 'error' in l][:1]}"


def notebook_cells(root: Path) -> tuple[bool, str]:
    """Time per cell flat: 2,000 cells (one CUDA call each) take less than 3x 1,000 cells."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for bench.*
    from bench.notebook_growth import notebook as many_cells

    seconds = []
    for cells in (1000, 2000):
        (root / f"n{cells}.ipynb").write_bytes(many_cells(cells))
        outcome = npu_migrate(["--no-cache", "--write", f"n{cells}.ipynb"], root, 600)
        if outcome.code != 0:
            return False, f"{cells} cells: exit {outcome.code}"
        seconds.append(outcome.seconds)
    ratio = seconds[1] / seconds[0]
    return ratio < 3, f"--write 1,000 cells {seconds[0]:.1f}s, 2,000 cells {seconds[1]:.1f}s (x{ratio:.1f})"


def notebook(n: int) -> str:
    head = {"cells": [{"cell_type": "code", "metadata": {}, "source": "import torch\ntorch.cuda.synchronize()\n",
                       "outputs": [], "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(head)[:-1] + ', "x": ' + "[" * n + "]" * n + "}"


N = 100_000
def bounded(filename: str, text: str, limit: float = 60) -> Callable[[Path], tuple[bool, str]]:
    """Round 4 (issue 38): a hostile file of a few MB is answered within ``limit`` with no
    traceback (a clean result, or one error line naming it), and the good file is migrated."""
    def trial(root: Path) -> tuple[bool, str]:
        (root / filename).write_text(text)
        (root / "good.py").write_bytes(CUDA_PY)
        outcome = npu_migrate(["--write", "--no-cache", "."], root, limit)
        if outcome.code is None:
            return False, f"no answer in {outcome.seconds:.0f}s"
        errors = [line for line in outcome.out.splitlines() if line.startswith("error:")]
        held = ("Traceback" not in outcome.out and outcome.code in (0, 2) and len(errors) <= 1
                and b"torch.npu" in (root / "good.py").read_bytes())
        return held, f"exit {outcome.code} in {outcome.seconds:.1f}s: {errors[0][:90] if errors else 'no error line'}"

    return trial


def invalid_ignore(where: str) -> Callable[[Path], tuple[bool, str]]:
    def trial(root: Path) -> tuple[bool, str]:
        (root / "good.py").write_bytes(CUDA_PY)
        if where == "gitignore":
            subprocess.run(["git", "init", "-q", str(root)], check=True)
            (root / ".gitignore").write_text("build/\n!\n")
            outcome = npu_migrate(["--write", "--no-cache", "."], root, 60)
            ok = outcome.code == 0 and "Traceback" not in outcome.out and b"torch.npu" in (root / "good.py").read_bytes()
            return ok, f"exit {outcome.code} in {outcome.seconds:.1f}s"
        (root / "pyproject.toml").write_text('[tool.npu-migrate]\nexclude = ["!"]\n')
        return one_clean_error(npu_migrate(["--write", "--no-cache", "."], root, 60), "exclude")

    return trial


def odd_exclude(root: Path) -> tuple[bool, str]:
    """Round 4, held-out: odd patterns in ``exclude`` are one error line naming ``exclude``."""
    (root / "good.py").write_bytes(CUDA_PY)
    (root / "pyproject.toml").write_text('[tool.npu-migrate]\nexclude = ["[", "\\\\", "**/!", "[z-a]"]\n')
    return one_clean_error(npu_migrate(["--write", "--no-cache", "."], root, 60), "exclude")


MB = 1 << 20
FENCE = "```bash\npython train.py --device cuda\n```\n"

CASES: dict[str, Callable[[Path], tuple[bool, str]]] = {
    "README of `[`, 2 MB (round 4)": bounded("README.md", "[" * (2 * MB)),
    "README of `[` lines after a bash fence, 2 MB (round 4)": bounded("README.md", FENCE + "[\n" * MB),
    "README of `![`, 2 MB, bash fence (round 4)": bounded("README.md", FENCE + "![" * MB),
    "YAML of `kN: cuda` lines, 8 MB (round 4)": bounded("c.yaml", "".join(f"k{i}: cuda\n" for i in range(8 * MB // 12))),
    "YAML of `kN: cuda` lines, 0.95 MB (round 4)": bounded("c.yaml", "".join(f"k{i}: cuda\n" for i in range(78_000))),
    "TOML of `kN = 'cuda'` lines, 250 KB (round 4)": bounded("c.toml", "".join(f"k{i} = 'cuda'\n" for i in range(16_500))),
    "JSON of 8 MB unclosed quotes (round 4)": bounded("c.json", '"' * (8 * MB)),
    "JSON of 4 MB unclosed /* (round 4)": bounded("c.json", "/*" * (2 * MB)),
    ".gitignore with a lone ! (round 4)": invalid_ignore("gitignore"),
    "Python of 3 MB torch.cuda lines (round 4, held-out)": bounded("big.py", "x = torch.cuda.is_available()\n" * (3 * MB // 31)),
    "Python of one 20 MB line (round 4, held-out)": bounded("big.py", "x = [" + "torch.cuda.a, " * (20 * MB // 14) + "]\n"),
    "notebook of 100,000 one-line cells (round 4, held-out)": bounded("n.ipynb", json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "source": "torch.cuda.a()\n", "outputs": [], "execution_count": None}]
        * 100_000, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})),
    "exclude of [, \\, **/!, [z-a] (round 4, held-out)": odd_exclude,
    "exclude = [\"!\"] (round 4)": invalid_ignore("config"),
    "deep JSON arrays (100k)": deep_case("c.json", "[" * N + f'"{WORD}"' + "]" * N),
    "deep JSON objects (100k)": deep_case("c.json", '{"a": ' * N + f'"{WORD}"' + "}" * N),
    "deep YAML flow (100k)": deep_case("c.yaml", "a: " + "[" * N + WORD + "]" * N + "\n"),
    "deep YAML block sequence (50k)": deep_case("c.yaml", "- " * 50_000 + WORD + "\n"),
    "deep TOML arrays in [tool.x] (50k)": deep_case("c.toml", "[tool.x]\ny = " + "[" * 50_000 + f'"{WORD}"' + "]" * 50_000 + "\n"),
    "deep TOML inline tables (50k)": deep_case("c.toml", "y = " + "{a = " * 50_000 + f'"{WORD}"' + "}" * 50_000 + "\n"),
    "deep conda environment.yml (100k)": deep_case("environment.yml", "dependencies:\n  - " + "[" * N + "pytorch-cuda" + "]" * N + "\n"),
    "deep notebook JSON (100k)": deep_case("n.ipynb", notebook(N)),
    "deep shell $( ) (50k)": deep_case("s.sh", "echo " + "$(" * 50_000 + WORD + ")" * 50_000 + "\n"),
    "deep shell if/fi (50k)": deep_case("s.sh", "if true; then " * 50_000 + f"export {WORD}; " + "fi; " * 50_000 + "\n"),
    "deep Dockerfile RUN $( ) (50k)": deep_case("Dockerfile", "FROM x\nRUN echo " + "$(" * 50_000 + WORD + ")" * 50_000 + "\n"),
    "deep Python brackets (50k)": deep_case("d.py", "x = " + "(" * 50_000 + "torch.cuda" + ")" * 50_000 + "\n"),
    "deep pyproject.toml as the project config (50k)": deep_config,
    "YAML alias bomb, 6 levels": alias_bomb(6),
    "YAML alias bomb, 10 levels": alias_bomb(10),
    "--write on a 37 KB one-line JSON (relocation)": write_vs_dry(
        "c.json", json.dumps({f"k{i}": {"device": "cuda", "backend": "nccl"} for i in range(800)}).encode()),
    "--write on 20k identical shell lines (relocation)": write_vs_dry(
        "s.sh", b"export CUDA_VISIBLE_DEVICES=0\n" * 20_000),
    "cache (A): entries shipped in the repository": cache_shipped,
    "cache (B): shared dir, planted cache + .gitignore link": cache_shared_dir,
    "--write through a symlink out of the project": symlink_out,
    "--write on a hard-linked file": hard_link,
    "requirements.txt with a UTF-8 BOM": requirements(b"\xef\xbb\xbftorch==2.1.0\nnumpy\n"),
    "requirements.txt with lone-CR line ends": requirements(b"torch==2.1.0\rnumpy\r"),
    "--jobs nan": jobs_nan,
    "700 MB address-space cap, 200k-line .py": memory_cap,
    "notebook of 1,000 then 2,000 cells (time per cell)": notebook_cells,
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the cases whose name contains this")
    args = parser.parse_args(argv)
    rows = []
    for name, trial in CASES.items():
        if args.k not in name:
            continue
        with tempfile.TemporaryDirectory(prefix="npu-adv-") as tmp:
            root = Path(tmp)
            os.environ["XDG_CACHE_HOME"] = str(root / "xdg")
            try:
                held, note = trial(root)
            except Exception as exc:  # noqa: BLE001 - a harness failure is a broken trial
                held, note = False, f"harness: {type(exc).__name__}: {exc}"
        rows.append((name, held, note))
        print(f"{'held ' if held else 'BROKE'}  {name}: {note}", file=sys.stderr, flush=True)
    print("\n| case | tried | held | broke | outcome |\n|---|---|---|---|---|")
    for name, held, note in rows:
        print(f"| {name} | 1 | {int(held)} | {int(not held)} | {note.replace('|', '/')} |")
    print(f"| **total** | {len(rows)} | {sum(h for _, h, _ in rows)} | {sum(not h for _, h, _ in rows)} | |")
    return 0 if all(h for _, h, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
