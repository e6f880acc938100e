"""A real LLM training script, migrated unmodified, trains on the emulated NPU as on CPU.

The script is not part of this repository (other projects' code is never
committed): give the path of a copy, e.g. transformers' own
``examples/pytorch/language-modeling/run_clm.py`` (the transformers sdist does
not ship ``examples/``; take the file from the transformers repository at the
release you test). It needs ``datasets`` and ``evaluate`` besides transformers.

What it does, in a scratch directory:

1. a tiny Llama config and a word-level tokenizer (``from_config`` training,
   nothing downloaded; HF_HUB_OFFLINE/HF_DATASETS_OFFLINE are set) and a local
   text file;
2. two copies of the script: ``original/`` and ``migrated/``; beside the
   migrated one a launcher ``train.sh`` written as the HF examples' READMEs and
   LLaVA-style launchers write it, ``--tf32 True`` included;
3. ``npu-migrate migrated --write``, and the diff of every file against the
   original, hunk by hunk;
4. the unmigrated launcher's arguments on CPU (they fail: ``--tf32 True``
   raises without CUDA, as on NPU), then the CPU reference: the original
   script with the launcher's arguments less ``--tf32`` (plus ``--use_cpu
   True --ddp_backend gloo`` with 2 processes, which torchrun on CPU needs);
5. the migrated script under ``npu-migrate emulate`` with the migrated
   launcher's arguments, unchanged;
6. every logged loss and gradient norm (``trainer_state.json``, unrounded) and
   every saved parameter (``model.safetensors``) compared for equality (fp32).

    python -m bench.llm_real_script PATH/TO/run_clm.py [--nproc 1|2] [--steps 4] [--workdir DIR]

Exit status 0 when the runs are equal, 1 when they differ or one fails.
Results are recorded in bench/results/llm_real_script.md.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ["the", "a", "npu", "trains", "on", "ascend", "cards", "with", "hccl", "and", "torch", "model", "loss", "step", "data", "text", "of", "small", "tiny", "llama"]

_MAKE_DATA = """
import sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, PreTrainedTokenizerFast
out, words = Path(sys.argv[1]), sys.argv[2].split()
text = "\\n".join(" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)) for i in range(64))
(out / "train.txt").write_text(text + "\\n")
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(words)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                        model_max_length=64).save_pretrained(out / "tiny")
LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64).save_pretrained(out / "tiny")
"""


def launcher(nproc: int, steps: int, data: Path) -> str:
    head = "python run_clm.py" if nproc == 1 else f"torchrun --nproc_per_node={nproc} --master_port=29731 run_clm.py"
    return (
        "#!/bin/bash\n"
        f"{head} \\\n"
        f"    --config_name {data}/tiny \\\n"
        f"    --tokenizer_name {data}/tiny \\\n"
        f"    --train_file {data}/train.txt \\\n"
        "    --do_train \\\n"
        "    --block_size 16 \\\n"
        "    --per_device_train_batch_size 2 \\\n"
        f"    --max_steps {steps} \\\n"
        "    --logging_steps 1 \\\n"
        "    --save_strategy no \\\n"
        "    --report_to none \\\n"
        "    --seed 0 \\\n"
        "    --tf32 True \\\n"
        "    --output_dir out\n"
    )


def script_args(text: str) -> list[str]:
    """The arguments after ``run_clm.py`` in a launcher (continuations joined)."""
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    return words[words.index("run_clm.py") + 1 :]


def without(args: list[str], option: str) -> list[str]:
    out, skip = [], False
    for word in args:
        if skip:
            skip = False
        elif word == option:
            skip = True
        elif not word.startswith(option + "="):
            out.append(word)
    return out


def run(cmd: list[str], cwd: Path, env: dict, log: Path, timeout: float) -> tuple[int, float]:
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False)
    return proc.returncode, time.monotonic() - start


def history(out: Path) -> list[tuple[float, float]]:
    state = json.loads((out / "trainer_state.json").read_text())
    return [(h["loss"], h["grad_norm"]) for h in state["log_history"] if "loss" in h]


def same_weights(a: Path, b: Path) -> tuple[int, bool]:
    import torch
    from safetensors.torch import load_file

    left, right = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    return len(left), left.keys() == right.keys() and all(torch.equal(left[k], right[k]) for k in left)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("script", type=Path)
    p.add_argument("--nproc", type=int, default=1, choices=(1, 2))
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--workdir", type=Path)
    p.add_argument("--timeout", type=float, default=900)
    a = p.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="llm_real_script_"))
    shutil.rmtree(work, ignore_errors=True)
    data, original, migrated = work / "data", work / "original", work / "migrated"
    for d in (data, original, migrated):
        d.mkdir(parents=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_DISABLED": "true",
           "TOKENIZERS_PARALLELISM": "false"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    subprocess.run([sys.executable, "-c", _MAKE_DATA, str(data), " ".join(WORDS)], check=True, env=env)
    for d in (original, migrated):
        shutil.copy2(a.script, d / "run_clm.py")
        (d / "train.sh").write_text(launcher(a.nproc, a.steps, data))

    tool = [sys.executable, "-m", "npu_migrate"]
    proc = subprocess.run([*tool, str(migrated), "--write"], capture_output=True, text=True, env=env, check=False)
    print(f"$ npu-migrate {migrated} --write  -> exit {proc.returncode}\n{proc.stdout.strip()}")
    for name in ("run_clm.py", "train.sh"):
        before = (original / name).read_text().splitlines(keepends=True)
        after = (migrated / name).read_text().splitlines(keepends=True)
        diff = "".join(difflib.unified_diff(before, after, f"original/{name}", f"migrated/{name}"))
        hunks = sum(line.startswith("@@") for line in diff.splitlines())
        print(f"--- diff of {name}: {hunks} hunk(s)\n{diff}")

    cpu_args = script_args((original / "train.sh").read_text())
    npu_args = script_args((migrated / "train.sh").read_text())
    print("migrated launcher's arguments:", shlex.join(npu_args))
    results: dict = {"nproc": a.nproc, "steps": a.steps}

    def launch(directory: Path, args: list[str], emulated: bool, tag: str) -> tuple[int, float]:
        run_env = {**env, "HF_DATASETS_CACHE": str(work / f"cache_{tag}")}
        if emulated:
            cmd = [*tool, "emulate", *(["--nproc", str(a.nproc)] if a.nproc > 1 else []), "run_clm.py", *args]
        elif a.nproc > 1:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(a.nproc),
                   "--master-port", "29732", "run_clm.py", *args]
        else:
            cmd = [sys.executable, "run_clm.py", *args]
        code, seconds = run(cmd, directory, run_env, work / f"{tag}.log", a.timeout)
        print(f"{tag}: exit {code} in {seconds:.1f} s (log {work / (tag + '.log')})")
        return code, seconds

    # The unmigrated arguments fail on CPU as they do on NPU (no CUDA for --tf32).
    code, _ = launch(original, [*cpu_args, "--output_dir", "out_unmigrated", "--max_steps", "1"], False, "unmigrated")
    log = (work / "unmigrated.log").read_text()
    results["unmigrated_fails_with_tf32_error"] = code != 0 and "--tf32 requires" in log

    reference = without(cpu_args, "--tf32") + (["--use_cpu", "True", "--ddp_backend", "gloo"] if a.nproc > 1 else [])
    cpu_code, cpu_s = launch(original, reference, False, "cpu")
    npu_code, npu_s = launch(migrated, npu_args, True, "npu")
    results.update(cpu_exit=cpu_code, npu_exit=npu_code, cpu_seconds=round(cpu_s, 1), npu_seconds=round(npu_s, 1))
    ok = cpu_code == 0 and npu_code == 0
    if ok:
        npu_device = next((line for line in (work / "npu.log").read_text().splitlines() if "device: npu" in line), "")
        cpu_hist, npu_hist = history(original / "out"), history(migrated / "out")
        count, weights = same_weights(original / "out", migrated / "out")
        results.update(npu_device_line=npu_device.split(" - ")[-1], cpu_history=cpu_hist, npu_history=npu_hist,
                       history_equal=cpu_hist == npu_hist and len(cpu_hist) == a.steps,
                       parameters=count, parameters_equal=weights)
        ok = results["history_equal"] and weights and bool(npu_device)
    results["equal"] = ok
    print(json.dumps(results, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
