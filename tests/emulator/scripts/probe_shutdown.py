"""The stand-in torch_npu's exit handshake with the npu autograd thread (its _shutdown.py).

A backward on another Python thread keeps the npu device thread busy in a
gradient hook until a timer releases it. settle_autograd_threads() must return
only after the device thread has finished that task. Prints one JSON report.
"""

import json
import threading
import time

import torch
import torch_npu  # noqa: F401  (registers the npu device)
from torch_npu import _shutdown

HOLD_S = 0.5
report = {}
entered, release = threading.Event(), threading.Event()


def blocking_hook(grad):
    report["hook_thread"] = threading.current_thread().name
    entered.set()
    release.wait()
    return grad


def busy_backward():
    x = torch.ones(3, device="npu", requires_grad=True)
    y = x * 2
    y.register_hook(blocking_hook)
    y.sum().backward()
    report["busy_done_s"] = time.monotonic() - start


start = time.monotonic()
worker = threading.Thread(target=busy_backward, name="busy-backward")
worker.start()
entered.wait()
threading.Timer(HOLD_S, release.set).start()
_shutdown.settle_autograd_threads()
report["settled_s"] = time.monotonic() - start
worker.join()
report["stashed_nothing"] = not torch._C._is_key_in_tls("context")
print(json.dumps(report))
