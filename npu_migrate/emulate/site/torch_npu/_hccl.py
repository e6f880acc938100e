"""The ``hccl`` process-group backend of the emulated NPU.

Each collective copies its npu tensors to CPU, runs the same collective on a
gloo backend, and copies the results back, so gradients reduce bitwise as they
would with gloo on CPU. Work completes synchronously. Only npu tensors are
routed here; a CPU tensor handed to an hccl group fails, as on hardware.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as c10d


def _done(result) -> c10d.Work:
    fut = torch.futures.Future()
    fut.set_result(result)
    return c10d._create_work_from_future(fut)


def _host(tensors):
    return [t.detach().to("cpu") for t in tensors]


def _back(dsts, srcs) -> None:
    with torch.no_grad():
        for d, s in zip(dsts, srcs):
            d.copy_(s)


def _check_npu(tensors, op: str) -> None:
    for t in tensors:
        if isinstance(t, (list, tuple)):
            _check_npu(t, op)
        elif t.device.type != "npu":
            raise RuntimeError(
                f"hccl {op}: expected npu tensors but got a tensor on {t.device}; "
                "HCCL only communicates device tensors (emulated by npu-migrate)"
            )


@contextmanager
def _autograd_context_hidden():
    """Take the context that ``backward()`` stashes in thread-local state out of it.

    Every gloo work snapshots the thread-local state of the thread that queues
    it, and during backward that state holds a ``contextvars.Context``. Gloo
    never runs Python, so it does not need it (see ``_GlooCalls``).
    """
    tls = torch._C
    if not tls._is_key_in_tls("context"):
        yield
        return
    context = tls._get_obj_in_tls("context")
    tls._remove_obj_from_tls("context")
    try:
        yield
    finally:
        tls._stash_obj_in_tls("context", context)


def _tensors_in(values) -> list[torch.Tensor]:
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(_tensors_in(value))
    return found


class _GlooCalls:
    """The inner gloo backend, called so that its worker threads never need the GIL.

    A gloo worker thread drops each finished work some time after ``wait()``
    returns. If it drops the last reference to a Python object (a host tensor
    staged here, or the context that ``backward()`` stashes), it must take the
    GIL: after interpreter shutdown began that aborts the process ("terminate
    called without an active exception"), and while the main thread holds the
    GIL to free the group (DDP's reducer letting go of it), it deadlocks. So the
    context is hidden from gloo, every tensor handed to gloo stays referenced
    here until gloo has let go of it, and ``drain()`` waits for that before the
    group is destroyed. docs/e2e.md ("Exit aborts") has the whole chain.
    """

    def __init__(self, gloo) -> None:
        self.backend = gloo
        self._held: list[torch.Tensor] = []

    def __getattr__(self, name: str):
        method = getattr(self.backend, name)

        def call(*args, **kwargs):
            self._held.extend(_tensors_in(args))
            with _autograd_context_hidden():
                work = method(*args, **kwargs)
            self._release_finished()
            return work

        return call

    def _release_finished(self) -> None:
        # use count 1: only this list still holds the tensor; gloo has dropped its work.
        self._held = [t for t in self._held if t._use_count() > 1]

    def drain(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        self._release_finished()
        while self._held and time.monotonic() < deadline:
            time.sleep(0.001)  # lets gloo's threads take the GIL they may need
            self._release_finished()
        self._held.clear()


class ProcessGroupHCCL(dist.ProcessGroup):
    """Emulated HCCL: gloo underneath, npu tensors staged through host memory."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)
        self._gloo = _GlooCalls(dist.ProcessGroupGloo(store, rank, size, timeout))
        # init_process_group hands a ProcessGroup subclass back as the group
        # itself, without registering any device on it. torch then sees no
        # device types and stages object collectives and barrier through CPU
        # tensors, which HCCL rejects. Declare npu, as ProcessGroupHCCL does on
        # hardware; the inner gloo backend stands behind it so that lookups by
        # device (pg._get_backend(npu)) find a real c10d Backend. Collectives
        # still go through the methods below.
        self._register_backend(
            torch.device("npu"), c10d.ProcessGroup.BackendType.CUSTOM, self._gloo.backend
        )

    def getBackendName(self) -> str:
        return "hccl"

    def shutdown(self) -> None:
        # destroy_process_group calls this while the interpreter is whole and the
        # main thread can give up the GIL: let gloo finish dropping its works now.
        self._gloo.drain()
        super().shutdown()

    def name(self) -> str:
        return "hccl"

    # -- collectives ------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        _check_npu(tensors, "allreduce")
        host = _host(tensors)
        self._gloo.allreduce(host, opts or c10d.AllreduceOptions()).wait()
        _back(tensors, host)
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        _check_npu(tensors, "allreduce_coalesced")
        host = _host(tensors)
        self._gloo.allreduce_coalesced(
            host, opts or c10d.AllreduceCoalescedOptions()
        ).wait()
        _back(tensors, host)
        return _done(tensors)

    def broadcast(self, tensors, opts=None):
        _check_npu(tensors, "broadcast")
        host = _host(tensors)
        self._gloo.broadcast(host, opts or c10d.BroadcastOptions()).wait()
        _back(tensors, host)
        return _done(tensors)

    def reduce(self, tensors, opts=None):
        _check_npu(tensors, "reduce")
        host = _host(tensors)
        self._gloo.reduce(host, opts or c10d.ReduceOptions()).wait()
        _back(tensors, host)
        return _done(tensors)

    def allgather(self, output_lists, inputs, opts=None):
        _check_npu([output_lists, inputs], "allgather")
        host_out = [_host(outs) for outs in output_lists]
        self._gloo.allgather(
            host_out, _host(inputs), opts or c10d.AllgatherOptions()
        ).wait()
        for outs, hosts in zip(output_lists, host_out):
            _back(outs, hosts)
        return _done(output_lists)

    def _allgather_base(self, output, input, opts=None):
        _check_npu([output, input], "_allgather_base")
        # gloo splits the output along its first dimension: flat, as NCCL reads it
        # (SyncBatchNorm gathers into a [1, world * n] tensor)
        host_out = output.detach().to("cpu").reshape(-1)
        self._gloo._allgather_base(
            host_out, input.detach().to("cpu").reshape(-1), opts or c10d.AllgatherOptions()
        ).wait()
        host_out = host_out.reshape(output.shape)
        _back([output], [host_out])
        return _done([output])

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        for out, inp in zip(outputs, inputs):
            self._allgather_base(out, inp, opts)
        return _done(outputs)

    # torch 2.13 names the tensor forms *_single and calls them from
    # all_gather_into_tensor, reduce_scatter_tensor and all_to_all_single (so
    # every accelerate gather and FSDP shard exchange). Without these methods
    # the C++ ProcessGroup would hand npu tensors straight to the inner gloo.
    def all_gather_single(self, output, input, opts=None):
        return self._allgather_base(output, input, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def reduce_scatter_single(self, output, input, opts=None):
        return self._reduce_scatter_base(output, input, opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        for out, inp in zip(outputs, inputs):
            self._reduce_scatter_base(out, inp, opts)
        return _done(outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        _check_npu([output_lists, inputs], "allgather_coalesced")
        host_out = [_host(outs) for outs in output_lists]
        self._gloo.allgather_coalesced(
            host_out, _host(inputs), opts or c10d.AllgatherOptions()
        ).wait()
        for outs, hosts in zip(output_lists, host_out):
            _back(outs, hosts)
        return _done(output_lists)

    def gather(self, output_lists, inputs, opts=None):
        _check_npu([output_lists, inputs], "gather")
        host_out = [_host(outs) for outs in output_lists]
        self._gloo.gather(host_out, _host(inputs), opts or c10d.GatherOptions()).wait()
        for outs, hosts in zip(output_lists, host_out):
            _back(outs, hosts)
        return _done(output_lists)

    def scatter(self, outputs, input_lists, opts=None):
        _check_npu([outputs, input_lists], "scatter")
        host_out = _host(outputs)
        host_in = [_host(ins) for ins in input_lists]
        self._gloo.scatter(host_out, host_in, opts or c10d.ScatterOptions()).wait()
        _back(outputs, host_out)
        return _done(outputs)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        _check_npu([outputs, input_lists], "reduce_scatter")
        host_out = _host(outputs)
        host_in = [_host(ins) for ins in input_lists]
        self._gloo.reduce_scatter(
            host_out, host_in, opts or c10d.ReduceScatterOptions()
        ).wait()
        _back(outputs, host_out)
        return _done(outputs)

    def _reduce_scatter_base(self, output, input, opts=None):
        _check_npu([output, input], "_reduce_scatter_base")
        host_out = output.detach().to("cpu")
        self._gloo._reduce_scatter_base(
            host_out, input.detach().to("cpu"), opts or c10d.ReduceScatterOptions()
        ).wait()
        _back([output], [host_out])
        return _done([output])

    def alltoall_base(
        self, output, input, output_split_sizes, input_split_sizes, opts=None
    ):
        _check_npu([output, input], "alltoall_base")
        host_out = output.detach().to("cpu")
        self._gloo.alltoall_base(
            host_out,
            input.detach().to("cpu"),
            output_split_sizes,
            input_split_sizes,
            opts or c10d.AllToAllOptions(),
        ).wait()
        _back([output], [host_out])
        return _done([output])

    def alltoall(self, outputs, inputs, opts=None):
        _check_npu([outputs, inputs], "alltoall")
        host_out = _host(outputs)
        self._gloo.alltoall(
            host_out, _host(inputs), opts or c10d.AllToAllOptions()
        ).wait()
        _back(outputs, host_out)
        return _done(outputs)

    def barrier(self, opts=None):
        self._gloo.barrier(opts or c10d.BarrierOptions()).wait()
        return _done([])

    def send(self, tensors, dst, tag=0):
        _check_npu(tensors, "send")
        self._gloo.send(_host(tensors), dst, tag).wait()
        return _done(tensors)

    def recv(self, tensors, src, tag=0):
        _check_npu(tensors, "recv")
        host = _host(tensors)
        self._gloo.recv(host, src, tag).wait()
        _back(tensors, host)
        return _done(tensors)


def _create(store, rank, size, timeout):
    return ProcessGroupHCCL(store, rank, size, timeout)


def register() -> None:
    if "HCCL" not in dist.Backend._plugins:
        dist.Backend.register_backend("hccl", _create, devices=["npu"])
    dist.is_hccl_available = lambda: True
