"""Run on the emulated NPU: load a checkpoint with ``map_location="npu:N"`` and check
that every tensor lands on npu:N with the same bits as a CPU load. Prints JSON."""

import json
import sys

import torch
import torch_npu  # noqa: F401  (the emulated one: registers the npu device)


def tensors(obj, prefix=""):
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from tensors(value, f"{prefix}/{key}")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from tensors(value, f"{prefix}/{i}")


def main(path: str, index: int) -> None:
    on_cpu = dict(tensors(torch.load(path, map_location="cpu")))
    on_npu = dict(tensors(torch.load(path, map_location=f"npu:{index}")))
    wrong_device = sorted(k for k, t in on_npu.items() if t.device != torch.device("npu", index))
    different = sorted(k for k, t in on_npu.items() if not torch.equal(t.cpu(), on_cpu[k]))
    print(json.dumps({"tensors": len(on_npu), "device_count": torch.npu.device_count(),
                      "wrong_device": wrong_device, "different": different,
                      "missing": sorted(set(on_cpu) - set(on_npu))}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
