"""How the stand-in torch_npu holds shutdown for torch's threads (see its _shutdown.py).

A helper thread stashes a context the way backward() does and keeps it in its
thread-local state for a while, standing in for a device thread that has not yet
released its graph task. Prints one JSON report.
"""

import contextvars
import json
import threading
import time

import torch
import torch_npu  # noqa: F401  (registers the npu device)
from torch_npu import _shutdown

HOLD_S = 0.5
report = {}

x = torch.ones(4, device="npu", requires_grad=True)
(x * 3).sum().backward()
report["grad"] = x.grad.cpu().tolist()
report["backward_tls_clean"] = not torch._C._is_key_in_tls("context")

stashed, release = threading.Event(), threading.Event()


def device_thread_stand_in():
    torch._C._stash_obj_in_tls("context", contextvars.copy_context())
    stashed.set()
    release.wait()
    torch._C._remove_obj_from_tls("context")


helper = threading.Thread(target=device_thread_stand_in)
helper.start()
stashed.wait()
report["followed"] = len(_shutdown._held_by_torch())
threading.Timer(HOLD_S, release.set).start()
start = time.monotonic()
_shutdown.wait_for_torch_threads(timeout_s=30)
report["waited_s"] = time.monotonic() - start
report["left"] = len(_shutdown._contexts)
helper.join()

# A context torch never lets go of: the wait gives up after its timeout.
torch._C._stash_obj_in_tls("context", contextvars.copy_context())
start = time.monotonic()
_shutdown.wait_for_torch_threads(timeout_s=0.3)
report["gave_up_after_s"] = time.monotonic() - start
torch._C._remove_obj_from_tls("context")

print(json.dumps(report))
