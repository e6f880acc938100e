"""Code that cannot be imported on Ascend is left alone and reported (NPU011): a file whose
module-level imports reach a package with no Ascend build, itself or through the project's
own modules (npu_migrate/python/cuda_backend.py ``unimportable_module``; the chains come
from the project facts, npu_migrate/pipeline/facts.py ``unimportable_via``). Held-out
round 15: LongLoRA's scripts import ``llama_attn_replace``, which imports flash-attn."""

from __future__ import annotations

import pytest

from npu_migrate.pipeline.facts import ProjectFacts

from ._files import write

SCRIPT = 'import torch\n{imports}\n\ndef main():\n    torch.cuda.set_device(0)\n\n\nif __name__ == "__main__":\n    main()\n'
FLASH = "import torch\nfrom flash_attn import flash_attn_func\n\n\ndef attention(q):\n    return flash_attn_func(q, q, q)\n"


@pytest.mark.parametrize("imports", [
    "from llama_attn_replace import attention",  # a module beside it
    "import llama_attn_replace",
    "from models.wrapper import build",  # two steps: models/wrapper.py imports the module
])
def test_a_script_that_imports_code_that_cannot_import_is_left_alone(tmp_path, run_cli, imports):
    write(tmp_path, "llama_attn_replace.py", FLASH)
    write(tmp_path, "models/__init__.py", "")
    write(tmp_path, "models/wrapper.py", "from llama_attn_replace import attention\n\n\ndef build():\n    pass\n")
    script = write(tmp_path, "eval.py", SCRIPT.format(imports=imports))
    before = script.read_text()
    result = run_cli("--write", "--no-cache", ".")
    assert script.read_text() == before
    assert "eval.py:5:5: NPU011 this module imports the project's" in result.output
    assert "`flash_attn`, which has no Ascend build" in result.output


@pytest.mark.parametrize("imports", [
    "try:\n    from llama_attn_replace import attention\nexcept ImportError:\n    attention = None",
    "def late():\n    from llama_attn_replace import attention",
    "import json",
])
def test_an_import_that_may_not_run_or_leads_nowhere_blocks_nothing(tmp_path, run_cli, imports):
    write(tmp_path, "llama_attn_replace.py", FLASH)
    script = write(tmp_path, "eval.py", SCRIPT.format(imports=imports))
    run_cli("--write", "--no-cache", ".")
    assert "torch.npu.set_device(0)" in script.read_text()


def test_the_chain_is_in_the_facts_and_their_key(tmp_path):
    flash = write(tmp_path, "a.py", FLASH)
    middle = write(tmp_path, "b.py", "import a\n")
    top = write(tmp_path, "c.py", "from b import x\n")
    alone = write(tmp_path, "d.py", "import torch\n")
    facts = ProjectFacts.scan([(str(p), p.read_bytes()) for p in (flash, middle, top, alone)])
    assert facts.blocked_import(str(top)) == (str(middle), "flash_attn")
    assert facts.blocked_import(str(middle)) == (str(flash), "flash_attn")
    assert facts.blocked_import(str(flash)) is None  # its own import is seen in the file
    assert facts.blocked_import(str(alone)) is None
    unblocked = ProjectFacts.scan([(str(p), p.read_bytes()) for p in (middle, top, alone)])
    assert unblocked.key() != facts.key()
