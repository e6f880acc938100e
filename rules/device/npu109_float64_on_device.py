"""NPU109: report float64 tensors created on (or moved to) the accelerator."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.cst_util import call_arg, string_value
from npu_migrate.python.rule import Example, Rule

from ._device_strings import is_device_word

#: a device string of the accelerator, before or after migration: a second run over
#: migrated code (``device='npu'``) reports the same lines
_ACCELERATOR = re.compile(r"(?:cuda|npu)(?::\d+)?")
_FLOAT64 = frozenset({"torch.float64", "torch.double", "numpy.float64", "numpy.double", "builtins.float"})
_FLOAT64_STRINGS = frozenset({"float64", "double", "f8"})
#: torch calls that take over a numpy array's dtype
_FROM_ARRAY = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor"})
#: numpy functions whose result is float64 unless ``dtype=`` says otherwise
_NUMPY_FLOAT64_DEFAULT = frozenset(
    {"numpy.zeros", "numpy.ones", "numpy.empty", "numpy.linspace", "numpy.logspace", "numpy.eye",
     "numpy.identity", "numpy.random.rand", "numpy.random.randn", "numpy.random.random",
     "numpy.random.random_sample", "numpy.random.uniform", "numpy.random.normal",
     "numpy.random.standard_normal"}
)
#: methods that move a tensor to the accelerator (``x.cuda()`` before, ``x.npu()`` after)
_TO_ACCELERATOR = frozenset({"cuda", "npu"})

MESSAGE = "a float64 tensor on the accelerator: Ascend NPUs do not compute in float64"
SUGGESTION = (
    "use torch.float32 on the NPU (or keep the float64 tensor on the CPU and move a `.float()` copy); "
    "`npu-migrate emulate --strict` rejects float64 on the npu device"
)


class Float64OnDevice(Rule):
    id = "NPU109"
    name = "float64-on-device"
    summary = "Report float64 tensors created on or moved to the accelerator (Ascend has no float64 compute)"
    fixable = False
    #: a numpy array is float64 without the word: ``torch.from_numpy(np.zeros(3)).cuda()``
    triggers = ("float64", "double", ("numpy", "cuda"), ("numpy", "npu"), ("numpy", "device"))
    rationale = """
Ascend NPUs have no float64 arithmetic: torch_npu rejects or falls back for most
float64 operators (its own runtime patcher maps `torch.cuda.DoubleTensor` to
`torch.npu.FloatTensor`), and `npu-migrate emulate --strict` refuses float64 on
the `npu` device. NPU104 still moves the device string (`device='cuda'` becomes
`device='npu'`), so the tensor's dtype is reported here, with the line:

- a factory or `torch.tensor(...)` call with `dtype=torch.float64`/`torch.double`
  and a `device=` that is a `'cuda'`/`'npu'` string, `torch.device(...)` of one,
  or a name that holds the training device (`device`, `args.device`,
  `x.device`; a `'cpu'` string is not);
- `.to('cuda', dtype=torch.float64)`, `.to(device='cuda', dtype=torch.double)`,
  `.to(torch.device('cuda'), torch.float64)`;
- `.double()` right before or after `.cuda()` (`x.double().cuda()`,
  `x.cuda().double()`, `x.to(device).double()`), and `.cuda()` / `.to(device)` of
  a call with `dtype=torch.float64`; `.to(torch.float64)` of a call with
  `device='cuda'`;
- a float64 numpy array taken over by `torch.from_numpy` / `torch.tensor` /
  `torch.as_tensor` (no `dtype=`) and moved (`.cuda()`, `.to(device)`,
  `device=`): `np.zeros`/`ones`/`empty`/`linspace`/`eye`/`np.random.rand`... are
  float64 unless `dtype=` says otherwise, as is `dtype=np.float64` or
  `.astype(np.float64)`.

The check runs on migrated code too (`'npu'`, `.npu()`), so a second run reports
the same lines. Whether float32 is precise enough is a decision for the author,
so nothing is rewritten.
"""
    examples = (
        Example("import torch\nw = torch.zeros(3, dtype=torch.float64, device='cuda')  # reported\n"),
        Example("import torch\nw = torch.zeros(3, dtype=torch.float64)\nv = torch.zeros(3, device='cuda')\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method == "to":
            self._to(node)
        elif method in _TO_ACCELERATOR and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
            inner = func.value
            if self._is_double_call(inner) or self._float64_keyword(inner) or self._from_float64_array(inner):
                self.report(node, MESSAGE, SUGGESTION)
        elif self.qualified_name(func) in _FROM_ARRAY and self._from_float64_array(node):
            device = call_arg(node, "device")
            if device is not None and self._accelerator(device.value):
                self.report(node, MESSAGE, SUGGESTION)  # torch.as_tensor(np.random.rand(n), device='cuda')
        elif method == "double" and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
            inner = func.value
            if isinstance(inner.func, cst.Attribute) and inner.func.attr.value in _TO_ACCELERATOR:
                self.report(node, MESSAGE, SUGGESTION)
            elif isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "to":
                device = call_arg(inner, "device", 0)
                if device is not None and self._accelerator(device.value):
                    self.report(node, MESSAGE, SUGGESTION)  # x.to(device).double()
        elif self._float64_keyword(node):
            device = call_arg(node, "device")
            if device is not None and self._accelerator(device.value):
                self.report(node, MESSAGE, SUGGESTION)

    def _to(self, node: cst.Call) -> None:
        device = call_arg(node, "device", 0)
        dtype = call_arg(node, "dtype")
        if dtype is None:
            positional = [a for a in node.args if a.keyword is None]
            dtype = positional[1] if len(positional) > 1 else None
        if device is not None and dtype is not None and self._accelerator(device.value) and self._is_float64(dtype.value):
            self.report(node, MESSAGE, SUGGESTION)
            return
        inner = node.func.value if isinstance(node.func, cst.Attribute) else None
        if not isinstance(inner, cst.Call):
            return
        if dtype is None and device is not None and self._accelerator(device.value):
            # torch.ones(4, dtype=torch.float64).to(device), torch.from_numpy(np.zeros(3)).to(device)
            if self._is_double_call(inner) or self._float64_keyword(inner) or self._from_float64_array(inner):
                self.report(node, MESSAGE, SUGGESTION)
        elif device is not None and self._is_float64(device.value):
            # torch.eye(3, device=device).to(torch.float64): the dtype in the device's place
            inner_device = call_arg(inner, "device")
            if inner_device is not None and self._accelerator(inner_device.value):
                self.report(node, MESSAGE, SUGGESTION)

    def _from_float64_array(self, node: cst.Call) -> bool:
        """``torch.from_numpy(a)`` / ``torch.tensor(a)`` / ``torch.as_tensor(a)`` (no
        ``dtype=``) of a float64 numpy array: ``np.zeros(3)``, ``np.linspace(...)``,
        ``np.random.rand(n)``, ``np.ones(n, dtype=np.float64)``, ``a.astype(np.float64)``."""
        if self.qualified_name(node.func) not in _FROM_ARRAY or not node.args or call_arg(node, "dtype") is not None:
            return False
        return self._numpy_float64(node.args[0].value)

    def _numpy_float64(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, cst.Call):
            return False
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "astype" and node.args:
            return self._is_float64(node.args[0].value)
        name = self.qualified_name(func)
        if name is None or not name.startswith("numpy."):
            return False
        dtype = call_arg(node, "dtype")
        if dtype is not None:
            return self._is_float64(dtype.value)
        return name in _NUMPY_FLOAT64_DEFAULT

    @staticmethod
    def _is_double_call(node: cst.Call) -> bool:
        return isinstance(node.func, cst.Attribute) and node.func.attr.value == "double" and not node.args

    def _float64_keyword(self, node: cst.Call) -> bool:
        dtype = call_arg(node, "dtype")
        return dtype is not None and self._is_float64(dtype.value)

    def _is_float64(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Attribute, cst.Name)):
            return self.qualified_name(node) in _FLOAT64
        return string_value(node) in _FLOAT64_STRINGS

    def _accelerator(self, node: cst.CSTNode) -> bool:
        """A ``'cuda'``/``'npu'`` string, ``torch.device`` of one, or a name that holds the
        training device (``device``, ``args.device``, ``self.device``, ``x.device``): in
        training code that is the accelerator."""
        value = string_value(node)
        if value is not None:
            return bool(_ACCELERATOR.fullmatch(value))
        if isinstance(node, cst.Call) and self.qualified_name(node.func) == "torch.device" and node.args:
            return self._accelerator(node.args[0].value)
        if isinstance(node, cst.Name):
            return is_device_word(node.value)
        if isinstance(node, cst.Attribute):
            return is_device_word(node.attr.value)
        return False
