"""The ``hccl`` process-group backend of the emulated NPU.

Each collective copies its npu tensors to CPU, runs the same collective on a
gloo backend, and copies the results back, so gradients reduce bitwise as they
would with gloo on CPU. Work completes synchronously. Only npu tensors are
routed here; a CPU tensor handed to an hccl group fails, as on hardware.
"""

from __future__ import annotations

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


class ProcessGroupHCCL(dist.ProcessGroup):
    """Emulated HCCL: gloo underneath, npu tensors staged through host memory."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        # init_process_group hands a ProcessGroup subclass back as the group
        # itself, without registering any device on it. torch then sees no
        # device types and stages object collectives and barrier through CPU
        # tensors, which HCCL rejects. Declare npu, as ProcessGroupHCCL does on
        # hardware; the inner gloo backend stands behind it so that lookups by
        # device (pg._get_backend(npu)) find a real c10d Backend. Collectives
        # still go through the methods below.
        self._register_backend(
            torch.device("npu"), c10d.ProcessGroup.BackendType.CUSTOM, self._gloo
        )

    def getBackendName(self) -> str:
        return "hccl"

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
        host_out = output.detach().to("cpu")
        self._gloo._allgather_base(
            host_out, input.detach().to("cpu"), opts or c10d.AllgatherOptions()
        ).wait()
        _back([output], [host_out])
        return _done([output])

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        for out, inp in zip(outputs, inputs):
            self._allgather_base(out, inp, opts)
        return _done(outputs)

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
