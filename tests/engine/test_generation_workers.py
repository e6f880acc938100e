"""A process group set up to serve a model gets no ``npu_runtime.install()`` (NPU701): it
waits in a collective between requests, and the runtime's hang watchdog would end it after
half an hour idle (held-out round 19: LLaMA2-Accessory's ``multi_gpu_wrapper.py`` worker).
A one-shot generation job, which ends, still gets it (torchtune's generate_v2_distributed)."""

from __future__ import annotations

import pytest

from ._files import write

WORKER = """import sys

import torch
import torch.distributed as dist


def model_worker(port, rank, world_size):
    dist.init_process_group(backend="gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)
    model = torch.nn.Linear(4, 4)
    while True:
        request = [None]
        dist.broadcast_object_list(request, src=0)
        with torch.inference_mode():
            dist.gather_object(model.generate(request[0]), dst=0)


if __name__ == "__main__":
    model_worker(port=int(sys.argv[1]), rank=int(sys.argv[2]), world_size=int(sys.argv[3]))
"""


@pytest.mark.parametrize("source,installed", [
    (WORKER, False),
    (WORKER.replace("    while True:\n", "    for _ in range(3):\n"), True),  # a job that ends
    (WORKER.replace("        with torch.inference_mode():\n            dist", "        loss = model(request[0]).sum()\n"
                                                                               "        loss.backward()\n        dist"), True),
])
def test_a_serving_worker_gets_no_runtime(tmp_path, run_cli, source, installed):
    worker = write(tmp_path, "multi_gpu_wrapper.py", source)
    run_cli("--write", "--no-cache", ".")
    text = worker.read_text()
    assert "torch.npu.set_device(rank)" in text
    assert ("npu_runtime.install()" in text) is installed
