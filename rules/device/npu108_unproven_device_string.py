"""NPU108: report ``'cuda'`` strings that may be devices but could not be proven to be."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._device_strings import DeviceLiteralRule, Verdict, analysis, swap


class UnprovenDeviceString(DeviceLiteralRule):
    id = "NPU108"
    name = "unproven-device-string"
    summary = "Report `'cuda'` / `'cuda:N'` strings that look like a device where NPU104 cannot prove the use"
    fixable = False
    triggers = ("cuda",)
    rationale = """
NPU104 rewrites a `'cuda'` string only where it can see it used as a device.
A string whose value is exactly a CUDA device (`'cuda'`, `'cuda:1'`,
`f"cuda:{i}"`) but whose use it cannot follow (passed to a function of another
module, a dictionary key, a name that only leaves the file, a `backend = 'cuda'`
that is only compared with other names) is reported here, so no device string
is left behind silently. Keys of `map_location` dicts are reported too: they
name the device a checkpoint was *saved* on, which stays `'cuda:N'` for
checkpoints trained on GPUs (NPU104 rewrites the values). Messages (print, logging, exceptions) and docstrings
are not reported.

The shared analysis (`npu_migrate/python/reaches_torch.py`) also says why a string
was left: compared with another system's platform or backend name (Triton's
`get_current_target().backend == "cuda"`, a helper of the file returning it), the
fallback of `detect() or "cuda"` (taken only on a machine without accelerators),
or passed as `device=` to a library whose device argument is not a torch device.

Fix by hand: write `'npu'` where it is a device; better, derive it at run time
(`torch.accelerator.current_accelerator().type`), which works on both. Silence a
line that is not a device with `# npu-migrate: ignore[NPU108]`.
"""
    examples = (
        Example("import torch\nBACKENDS = {'cuda': 'nccl', 'cpu': 'gloo'}  # reported\n"),
        Example("import torch\nprint('cuda')\n"),
    )

    def leave_file(self) -> None:
        device_strings = analysis(self.ctx)
        for literal in self.candidates:
            verdict = device_strings.classify(literal)
            text = self.ctx.module.code_for_node(literal)
            if verdict is Verdict.MAP_KEY:
                self.report(
                    literal,
                    f"map_location key {text} names the device the checkpoint was saved on; left unchanged",
                    f"keep {text} for checkpoints saved on GPUs; for checkpoints saved on NPUs add the same "
                    f"entry with key {self.ctx.module.code_for_node(swap(literal))}",
                )
            elif verdict is Verdict.OTHER:
                self.report(
                    literal,
                    f"{text} is {device_strings.reason(literal)}; left unchanged",
                    "keep it: that system names CUDA GPUs this way (on Ascend its own answer differs, e.g. "
                    "triton-ascend's backend); if torch code relies on it, test torch's device instead "
                    "(torch.accelerator.current_accelerator().type)",
                )
            elif verdict is Verdict.FALLBACK:
                self.report(
                    literal,
                    f"{text} is {device_strings.reason(literal)}; left unchanged",
                    "make sure the detection finds the NPU on Ascend (torch.accelerator.current_accelerator(), or "
                    "hasattr(torch, 'npu') and torch.npu.is_available()); the fallback must stay usable on CPU machines",
                )
            elif verdict is Verdict.UNKNOWN:
                why = device_strings.reason(literal)
                self.report(
                    literal,
                    f"{text} looks like a CUDA device, but its use as a device could not be proven"
                    + (f" ({why})" if why else "") + "; left unchanged",
                    "if it is a device write 'npu' (or use torch.accelerator.current_accelerator().type); "
                    "otherwise add `# npu-migrate: ignore[NPU108]`",
                )
