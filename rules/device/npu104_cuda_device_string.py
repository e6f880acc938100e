"""NPU104: ``'cuda'`` device strings -> ``'npu'`` where they are used as a device."""

from __future__ import annotations

import functools

import libcst as cst

from npu_migrate.python.imports import guard_text, npu_device_type
from npu_migrate.python.rule import Example

from ._device_strings import DeviceLiteralRule, Flow, analysis, swap


class CudaDeviceString(DeviceLiteralRule):
    id = "NPU104"
    name = "cuda-device-string"
    summary = "Rewrite `'cuda'` / `'cuda:N'` / `f'cuda:{i}'` to `'npu...'` where the string is used as a device"
    triggers = ("cuda",)
    targets = ("npu", "cpu")
    rationale = """
On Ascend the device type is `npu`: `torch.device('npu:0')`, `x.to('npu')`,
`torch.autocast('npu')`, `map_location='npu:0'`. A `'cuda'` device string fails
there (`torch.device('cuda')` raises when torch was not built with CUDA), so
each one that is *used as a device* is rewritten, keeping quotes, string
prefixes and the rest of the text (`'cuda:0'` -> `'npu:0'`, `f"cuda:{rank}"`
-> `f"npu:{rank}"`, `'cuda:%d' % i`, `'cuda:' + str(i)`, `'cuda:{}'.format(i)`).

A string counts as a device when its value reaches, possibly through a
conditional expression, `or`, formatting, a lambda, a tuple or a dict:
- `torch.device(...)` (both forms: `torch.device('cuda', i)`), `.to(...)`,
  `.cuda(...)`, a positional argument of `torch.cuda.*`, the `map_location` of
  `torch.load` (strings, the *values* of `{'cuda:0': 'cuda:1'}` dicts, lambdas;
  the keys name where the checkpoint was saved, so NPU108 reports them);
- any keyword that names a device (`device=`, `device_type=`, `map_location=`,
  `pin_memory_device=`, `output_device=`...), so `torch.Generator(device=...)`,
  `torch.amp.custom_fwd(device_type=...)` and factories are covered;
- the device type of `torch.autocast`, `torch.amp.autocast`,
  `torch.amp.GradScaler`, `torch.get_autocast_dtype`, `torch.set_autocast_enabled`...,
  `torch.set_default_device`, `torch.Generator`;
- a comparison with a device expression: `x.device.type == 'cuda'`,
  `'cuda' in str(device)`, `device.type in ('cuda', 'xpu')`, `args.device != 'cuda'`,
  `str(device).startswith('cuda')`;
- a name, attribute, dict key or parameter that names a device (`device = 'cuda'`,
  `self.device = ...`, `{"device": "cuda"}`, `def f(device='cuda')`,
  `cfg.get('device', 'cuda')`, an argparse `--device` default or choices), or a
  function whose name does (`return 'cuda'` in `get_device()`);
- any other name whose uses reach one of the above (followed through scopes,
  up to three assignments deep);
- `'cuda' if torch.cuda.is_available() else 'cpu'` wherever it stands.

Everything else is left alone: messages (print, logging, exceptions), docstrings,
comments, dictionary lookups. Strings that look like a device but whose use
cannot be proven are reported by NPU108 instead. Code that already names
`'npu'` next to the string (`device.type in ('cuda', 'npu')`) is left alone, and
so is code in an if/elif chain with an NPU branch (NPU010).

Integer devices (`.to(local_rank)`, `torch.device(0)`, `device=0`) are not
touched: since torch 2.x an integer device means "index N of the current
accelerator" (`deviceFromLong` in torch's python_arg_parser.h calls
`at::getAccelerator`), which is the NPU once torch_npu is imported.

A key of a dict literal whose value is a `torch.cuda` object that NPU101 renames
(`{(torch.half, "cuda"): torch.cuda.HalfTensor}`, LLaMA2-Accessory's `get_tensor_type`) is
rewritten with it: otherwise the lookup of the rewritten device misses. Other dicts keyed by
device type keep their keys. A device string under a test of Lightning's accelerator name
(`args.accelerator.upper() == "GPU"`, in a file that imports Lightning) is for Lightning's
CUDA path, and is left and reported (NPU108).
A test helper that skips what its callers ask for (`def skip_if_unavailable(self,
device): if device == "cuda" and not torch.cuda.is_available(): self.skipTest(...)`)
keeps its CUDA clause and gains the NPU one, `(device == "cuda" and not
torch.cuda.is_available()) or (device == "npu" and not torch.npu.is_available())`: the
suite's CUDA-only tests, which the tool keeps, still skip on Ascend, and its NPU tests
skip on a machine without an NPU, as the CUDA ones did.
"""
    examples = (
        Example(
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
            (
                "import torch\n"
                "\n"
                + guard_text(fallback=(npu_device_type("'"),)) +
                "\n"
                "device = torch.device('npu' if torch.cuda.is_available() else 'cpu')\n"
            ),
        ),
        Example(
            'import torch\nstate = torch.load(path, map_location=f"cuda:{rank}")\n',
            (
                "import torch\n"
                "\n"
                + guard_text() +
                "\n"
                'state = torch.load(path, map_location=f"npu:{rank}")\n'
            ),
        ),
        Example(
            "import torch\nif x.device.type == 'cuda':\n    pass\n",
            "import torch\nif x.device.type == 'npu':\n    pass\n",
        ),
        Example("import torch\nprint('cuda')\nlogger.info(f'moved to cuda:{rank}')\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._both: set[cst.CSTNode] = set()

    def leave_file(self) -> None:
        device_strings = analysis(self.ctx)
        imports_torch = self.ctx.imports.imports_module("torch")
        for literal in self.candidates:
            if device_strings.classify(literal) is Flow.TORCH:
                text = self.ctx.module.code_for_node(literal)
                new = functools.partial(swap, device=self.ctx.target.device)
                # a file that imports no torch (a config of plain values) only names the device:
                # no `import torch_npu` there (the code that uses the value imports torch)
                # (a comparison counts as NPU work, for npu_runtime.install(), but adds no
                # import guard of its own: npu_migrate/python/compared.py)
                self.replace(literal, new, f"device string {text} -> {self.ctx.module.code_for_node(new(literal))}",
                             reason=device_strings.reason(literal), needs_torch_npu=imports_torch)
                condition = next((c for c in device_strings.skip_conditions
                                  if any(a is c for a in self.ctx.ancestors(literal))), None)
                if condition is not None and condition not in self._both:
                    # a test helper that skips for its callers: it keeps skipping the CUDA tests
                    # the tool leaves and also skips the NPU ones where no NPU is present
                    self._both.add(condition)
                    self.replace(condition, functools.partial(_or_original, condition),
                                 "skip condition: the CUDA clause kept, the NPU clause added",
                                 reason="a test helper that skips for its callers, some of which keep CUDA devices",
                                 needs_torch_npu=imports_torch)


def _or_original(original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
    """``(<original condition>) or (<its NPU rewrite>)``."""
    def wrapped(node: cst.BaseExpression) -> cst.BaseExpression:
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    return cst.BooleanOperation(left=wrapped(original), operator=cst.Or(), right=wrapped(updated))
