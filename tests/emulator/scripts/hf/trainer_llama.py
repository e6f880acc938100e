"""Train a tiny Llama with the HF Trainer; write losses, grad norms and parameters.

    trainer_llama.py OUT.json MODE[,MODE...] --workdir DIR [--resume-step K]

MODEs: ``fp32``, ``bf16``, ``lora`` (a PEFT LoRA fine-tune) and ``fsdp`` (run by
a 2-process launcher). Each mode trains in ``DIR/MODE`` and saves a checkpoint
every 3 steps. ``--resume-step K`` instead resumes ``fp32`` from
``DIR/fp32/checkpoint-K``, as a restarted job does. Without ``npu-migrate
emulate`` it trains on CPU (``use_cpu=True``, gloo); under it, the Trainer picks
the npu device on its own (hccl with 2 processes), as a migrated script does.
Every loss is recorded unrounded through compute_loss.
"""

import argparse
import os

import torch
from common import TokenData, digest, floats, on_npu, tiny_llama, write
from transformers import Trainer, TrainingArguments


class RecordingTrainer(Trainer):
    losses: list

    def compute_loss(self, model, inputs, *args, **kwargs):
        loss = super().compute_loss(model, inputs, *args, **kwargs)
        self.losses.append(float(loss.detach().float()))
        return loss


def lora(model):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    torch.manual_seed(1)
    return get_peft_model(model, config)


def train(mode: str, workdir: str, steps: int, resume: str | None) -> dict:
    args = TrainingArguments(
        output_dir=os.path.join(workdir, mode),
        max_steps=steps,
        per_device_train_batch_size=4,
        learning_rate=3e-3,
        warmup_steps=1,
        logging_steps=1,
        save_strategy="steps",
        save_steps=3,
        report_to=[],
        seed=0,
        use_cpu=not on_npu(),
        bf16=mode == "bf16",
        fsdp="full_shard" if mode == "fsdp" else "",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    model = tiny_llama()
    if mode == "lora":
        model = lora(model)
    trainer = RecordingTrainer(model=model, args=args, train_dataset=TokenData())
    trainer.losses = []
    trainer.train(resume_from_checkpoint=resume)
    named = [(n, p) for n, p in trainer.model_wrapped.named_parameters() if p.requires_grad]
    return {
        "device": str(next(trainer.model.parameters()).device),
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "losses": trainer.losses,
        "grad_norms": [h["grad_norm"] for h in trainer.state.log_history if "grad_norm" in h],
        # FSDP2 shards parameters as DTensors: digest() gathers them whole.
        "params": {n.removeprefix("module."): d for n, d in digest(named).items()},
        "weights": floats(named) if mode == "bf16" else None,
        "global_step": trainer.state.global_step,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("modes")
    p.add_argument("--workdir", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--resume-step", type=int)
    a = p.parse_args()
    report = {}
    for mode in a.modes.split(","):
        resume = None
        if a.resume_step is not None:
            resume = os.path.join(a.workdir, mode, f"checkpoint-{a.resume_step}")
        report[mode] = train(mode, a.workdir, a.steps, resume)
    rank = int(os.environ.get("RANK", "0"))
    write(a.out if rank == 0 else f"{a.out}.rank{rank}", report)
    if torch.distributed.is_initialized():
        # joins gloo's threads before the interpreter exits: without it the 2-process CPU
        # reference once aborted at exit ("terminate called without an active exception",
        # -6) after writing its results, on a loaded machine (CI, 2026-11-28)
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
