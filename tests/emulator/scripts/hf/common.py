"""Shared pieces of the HF-stack scripts: a tiny Llama built locally, its data, digests."""

import hashlib
import json
import os

import torch


def on_npu() -> bool:
    """True under ``npu-migrate emulate`` (the scripts' CPU twin runs without it)."""
    return os.environ.get("NPU_MIGRATE_EMULATOR") == "1"


if on_npu():
    import torch_npu  # noqa: F401


def tiny_llama(seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


class TokenData(torch.utils.data.Dataset):
    """Random token sequences; every sample is fixed by its index."""

    def __init__(self, n: int = 64, length: int = 16, vocab: int = 64) -> None:
        gen = torch.Generator().manual_seed(1234)
        self.ids = torch.randint(0, vocab, (n, length), generator=gen)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        ids = self.ids[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


def digest(named_tensors) -> dict:
    """sha256 of every tensor's bytes (CPU, contiguous), by name."""
    out = {}
    for name, t in named_tensors:
        t = full(t).to("cpu").contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        out[name] = hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]
    return out


def full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor: FSDP2 shards parameters as DTensors (full_tensor gathers)."""
    t = t.detach()
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def floats(named_tensors) -> dict:
    return {n: full(t).to("cpu", torch.float32).flatten().tolist() for n, t in named_tensors}


def write(path: str, report: dict) -> None:
    with open(path, "w") as f:
        json.dump(report, f)
