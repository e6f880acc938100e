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
            elif verdict is Verdict.UNKNOWN:
                self.report(
                    literal,
                    f"{text} looks like a CUDA device, but its use as a device could not be proven; left unchanged",
                    "if it is a device write 'npu' (or use torch.accelerator.current_accelerator().type); "
                    "otherwise add `# npu-migrate: ignore[NPU108]`",
                )
