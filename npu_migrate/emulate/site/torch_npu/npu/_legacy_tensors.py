"""``torch.npu.FloatTensor`` and the other legacy typed tensor constructors.

Old scripts (PyTorch-GAN's, many DCGAN/WGAN ports) write
``Tensor = torch.cuda.FloatTensor``, then ``Tensor(n, 1).fill_(1.0)``,
``Tensor(numpy_array)``, ``imgs.type(Tensor)`` and ``isinstance(x, Tensor)``;
migrated, that is ``torch.npu.FloatTensor``. Each name here is a class whose
call follows torch's legacy constructor (sizes give an uninitialised tensor, a
sequence or array gives its data, a ``torch.Size`` gives a shape, a tensor of
the same type is returned as is) and puts the result on the current npu
device. Its type name is ``torch.npu.FloatTensor``, the string torch itself
parses, so ``Tensor.type(torch.npu.FloatTensor)`` converts as on hardware.
"""

from __future__ import annotations

import torch

_TYPES = {
    "DoubleTensor": torch.float64,
    "FloatTensor": torch.float32,
    "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16,
    "LongTensor": torch.int64,
    "IntTensor": torch.int32,
    "ShortTensor": torch.int16,
    "CharTensor": torch.int8,
    "ByteTensor": torch.uint8,
    "BoolTensor": torch.bool,
}

_CPU_CONSTRUCTORS = {name: getattr(torch, name) for name in _TYPES}


class _LegacyTensorType(type):
    """Metaclass: calling the class builds a tensor; isinstance checks device and dtype."""

    def __call__(cls, *args, device=None, **kwargs):
        target = torch.device("npu", torch.npu.current_device()) if device is None else torch.device(device)
        if target.type != "npu":
            raise RuntimeError(
                f"legacy constructor expects device type: npu but device type: {target.type} was passed"
            )
        if len(args) == 1 and isinstance(args[0], torch.Tensor) and not kwargs:
            (source,) = args
            if source.device.type == "npu" and source.dtype == cls.dtype:
                return source
            raise TypeError(
                f"expected {cls.__name__} (got {source.type()})"
            )
        # torch's own CPU constructor decides what the arguments mean (sizes,
        # data, torch.Size); the result then moves to the device.
        host = _CPU_CONSTRUCTORS[cls.__qualname__](*args, **kwargs)
        return host.to(target)

    def __instancecheck__(cls, obj) -> bool:
        return (
            isinstance(obj, torch.Tensor)
            and obj.device.type == "npu"
            and obj.dtype == cls.dtype
        )


def _make(name: str, dtype: torch.dtype) -> type:
    # The dotted type name is what Tensor.type(cls) reads (tp_name) and parses.
    cls = _LegacyTensorType(
        f"torch.npu.{name}",
        (),
        {"dtype": dtype, "is_npu": True, "is_sparse": False, "__module__": "torch.npu"},
    )
    cls.__qualname__ = name
    return cls


LEGACY_TENSOR_TYPES = {name: _make(name, dtype) for name, dtype in _TYPES.items()}
