"""A plain accelerate training loop on a tiny Llama, started by ``accelerate launch``.

    accelerate_loop.py OUT.json [--steps N]

Under ``npu-migrate emulate`` accelerate finds the npu device (hccl with 2
processes); otherwise ``accelerate launch --cpu`` runs it on CPU with gloo.
Every step gathers the per-process losses (``accelerator.gather``, which is
``all_gather_into_tensor``) and records them with the gradient norm.
"""

import argparse

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from common import TokenData, digest, tiny_llama, write


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=4)
    a = p.parse_args()
    accelerator = Accelerator()
    set_seed(0)
    model = tiny_llama()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = torch.utils.data.DataLoader(TokenData(), batch_size=4, shuffle=True)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    gathered, norms = [], []
    for step, batch in enumerate(loader):
        if step == a.steps:
            break
        loss = model(**batch).loss
        accelerator.backward(loss)
        norms.append(float(accelerator.clip_grad_norm_(model.parameters(), 10.0)))
        opt.step()
        opt.zero_grad()
        gathered.append(accelerator.gather(loss.detach()[None]).tolist())
    unwrapped = accelerator.unwrap_model(model)
    if accelerator.is_main_process:
        write(
            a.out,
            {
                "device": str(accelerator.device),
                "distributed_type": str(accelerator.distributed_type),
                "num_processes": accelerator.num_processes,
                "gathered_losses": gathered,
                "grad_norms": norms,
                "params": digest(unwrapped.named_parameters()),
            },
        )
    accelerator.end_training()


if __name__ == "__main__":
    main()
