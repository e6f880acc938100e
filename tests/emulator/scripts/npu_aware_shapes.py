"""Code that already runs on the NPU, or keeps CUDA-only work behind CUDA tests (issue 22).

Run on the emulated NPU as it is and after `npu-migrate`: both must run and print the
same report. The prefetcher picks its side stream from two flags, one per device
type; the kernel choice reads the GPU's compute capability behind a CUDA test.
"""

import contextlib
import json

import torch


class Prefetcher:
    def __init__(self, batches, device=torch.device("cuda")):
        self.batches = batches
        self.device = device
        self.on_gpu = device.type == "cuda" and torch.cuda.is_available()
        self.on_npu = device.type == "npu" and torch.npu.is_available()

    def __iter__(self):
        if self.on_gpu:
            side = torch.cuda.Stream(device=self.device)
            switch = lambda: torch.cuda.stream(side)
        elif self.on_npu:
            side = torch.npu.Stream(device=self.device)
            switch = lambda: torch.npu.stream(side)
        else:
            side = None
            switch = contextlib.nullcontext
        for batch in self.batches:
            with switch():
                moved = batch.to(self.device, non_blocking=True)
            yield moved


class KernelChoice:
    def __init__(self, fused=True):
        self.mode = "generic"
        self.gpu_backends = None
        if not fused or not torch.cuda.is_available():
            return
        props = torch.cuda.get_device_properties(torch.device("cuda"))
        self.mode = "sm80" if (props.major, props.minor) >= (8, 0) else "older"
        self.gpu_backends = {"flash": props.major >= 8}

    def backends(self, x):
        size, on_gpu = x.shape[-1], x.is_cuda
        chosen = self.gpu_backends if on_gpu else {"math": True}
        return sorted(chosen.items())


def main():
    device = torch.device("npu")
    batches = [torch.full((2,), float(i)) for i in range(3)]
    seen = [str(b.device) for b in Prefetcher(batches, device)]
    choice = KernelChoice()
    print(json.dumps({"devices": seen, "mode": choice.mode, "backends": choice.backends(batches[0].to(device))}))


if __name__ == "__main__":
    main()
