"""NPU100: add ``import torch_npu`` where the migrated file uses an NPU API."""

from npu_migrate.python.rule import Example, Rule


class ImportTorchNpu(Rule):
    id = "NPU100"
    name = "import-torch-npu"
    summary = "Add `import torch_npu` right after the file's `import torch` when the migrated file uses an NPU API"
    rationale = """
`torch.npu`, the `npu` device type, `Tensor.npu()` and the `hccl` backend only
exist once `torch_npu` has been imported. The import is added only to files
that this run changed in a way that needs it (never to a file that is otherwise
untouched, unlike the vendor tool, which adds it everywhere), and only when the
file does not import torch_npu already.

Placement: right after the first top-level statement that imports torch, or right
before it when that statement itself imports from `torch.npu`. A file that only
imports torch inside functions gets the import at the top (libcst's
AddImportsVisitor).

Rules mark each of their fixes as needing torch_npu or not (`map_location="cpu"`
does not), and this rule has no visitor of its own. Ignore it (`--ignore NPU100`)
if your project imports torch_npu in one central place.
"""
    examples = (
        Example(
            "import torch\nx = torch.zeros(2).cuda()\n",
            "import torch\nimport torch_npu\nx = torch.zeros(2).npu()\n",
            also=("NPU103",),
        ),
    )
