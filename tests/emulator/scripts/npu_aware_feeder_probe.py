"""Held-out shape 1: a device-generic feeder (flags per device type, a conditional
expression choosing the stream module, a device-type list extended with "npu") and a
fp8 probe behind `device.type != "cuda"`."""
import contextlib
import json

import torch


class Feeder:
    def __init__(self, batches, device="cuda"):
        self.batches = batches
        self.device = torch.device(device)
        self.use_cuda = self.device.type == "cuda" and torch.cuda.is_available()
        self.use_npu = self.device.type == "npu" and hasattr(torch, "npu") and torch.npu.is_available()

    def __iter__(self):
        side = torch.cuda.Stream() if self.use_cuda else (torch.npu.Stream() if self.use_npu else None)
        for batch in self.batches:
            if side is not None:
                module = torch.cuda if self.use_cuda else torch.npu
                ctx = module.stream(side)
            else:
                ctx = contextlib.nullcontext()
            with ctx:
                yield batch.to(self.device, non_blocking=True)


def pin_ok(device_type):
    kinds = ["cuda", "xpu"]
    if hasattr(torch, "npu"):
        kinds.append("npu")
    return device_type in kinds


def supports_fp8(device):
    if device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


def main():
    batches = [torch.full((2,), float(i)) for i in range(3)]
    feeder = Feeder(batches, device="npu")
    seen = [str(b.device) for b in feeder]
    dev = torch.device("npu")
    print(json.dumps({"devices": seen, "pin": pin_ok(dev.type), "fp8": supports_fp8(dev)}))


if __name__ == "__main__":
    main()
