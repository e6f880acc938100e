"""NPU013: a file written for a newer Python than the one npu-migrate runs on is left unchanged."""

from npu_migrate.python.rule import Example, Rule


class NewerPython(Rule):
    id = "NPU013"
    impact = "blocking"
    name = "newer-python"
    summary = "A file whose grammar the running Python rejects (written for a newer Python) is reported, not rewritten"
    fixable = False
    rationale = """
npu-migrate reads every Python file twice: libcst, which knows the grammars of newer
Pythons, for the edits, and CPython's own `ast` of the interpreter it runs on for the
analyses that prove an edit safe (the CUDA gates in front of kernels, the functions that
cannot run on Ascend, the code nothing reaches, the flags set after a CUDA-only
import). A file that only a newer Python parses (PEP 695's `class Attention[T: Config]`,
`type X = ...`, Python 3.12's f-strings) has no `ast` on an older interpreter, so those
analyses cannot run there, and its rewrites would be the unproven ones this tool exists
to avoid (held-out round 25: Fast-LLM requires Python 3.12; run on 3.11, the
`torch.cuda.is_available()` after each CUDA-only import in its try blocks was rewritten,
letting NPU tensors into flash-attn, apex, mamba and fla kernels).

So such a file is left unchanged and reported once: run npu-migrate under the Python
the project is written for (it installs on 3.10 and later), and the file is migrated
with every analysis. This rule has no visitor: the engine applies it to the other
rules' edits.
"""
    examples = (
        # (a file every supported Python parses is migrated as usual: the rule never applies)
        Example(
            "import torch\n"
            "\n"
            "x = torch.ones(1).cuda()\n",
            "import torch\n"
            "\n"
            "try:\n"
            "    import torch_npu  # noqa: F401\n"
            "except ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n"
            "    pass\n"
            "\n"
            "x = torch.ones(1).npu()\n",
            also=("NPU103",),
        ),
    )
