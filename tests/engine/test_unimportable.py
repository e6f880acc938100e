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


def test_a_test_of_a_src_layout_package_reaches_its_modules(tmp_path, run_cli):
    """alpaca_farm's tests/test_flash_opt.py imports ``alpaca_farm.flash_models.flash_opt``
    (src/alpaca_farm/...), which imports flash-attn (held-out round 16: 10 needless hunks)."""
    write(tmp_path, "pyproject.toml", '[project]\nname = "pkg"\n')
    write(tmp_path, "src/pkg/__init__.py", "")
    write(tmp_path, "src/pkg/models/__init__.py", "")
    write(tmp_path, "src/pkg/models/flash_opt.py", FLASH)
    test = write(tmp_path, "tests/test_flash_opt.py",
                 "import torch\nfrom pkg.models import flash_opt\n\n\ndef test_forward():\n"
                 "    x = torch.zeros(2).cuda()\n    flash_opt.attention(x)\n")
    before = test.read_text()
    result = run_cli("--write", "--no-cache", ".")
    assert test.read_text() == before
    assert "`flash_attn`, which has no Ascend build" in result.output


MODEL = ('import torch\nfrom torch.utils.cpp_extension import load\n\n'
         'timex_cuda = load(name="timex", sources=["cuda/timex_op.cpp", "cuda/timex_cuda.cu"])\n\n\n'
         'def make(n):\n    return torch.zeros(n, device="cuda")\n')


def test_a_module_that_builds_cuda_sources_at_import_blocks_its_importers(tmp_path, run_cli):
    """RWKV-v2's src/model.py builds its CUDA kernel when imported: it, the train.py that
    imports it and the trainer only that train.py imports are left (held-out round 19);
    run.py, which does not import it, is migrated."""
    model = write(tmp_path, "src/model.py", MODEL)
    trainer = write(tmp_path, "src/trainer.py", "import torch\n\n\ndef device():\n    return torch.cuda.current_device()\n")
    train = write(tmp_path, "train.py", "import torch\nfrom src.model import make\nfrom src.trainer import device\n\n"
                                        "if __name__ == '__main__':\n    torch.cuda.set_device(0)\n    make(device())\n")
    run = write(tmp_path, "run.py", "import torch\n\nif __name__ == '__main__':\n    torch.cuda.set_device(0)\n")
    before = {p: p.read_text() for p in (model, trainer, train)}
    result = run_cli("--write", "--no-cache", ".")
    assert {p: p.read_text() for p in before} == before
    assert "torch.npu.set_device(0)" in run.read_text()
    assert "JIT-builds CUDA sources at module level (`timex_cuda`, line 4)" in result.output
    assert "imported only by modules that cannot be imported on Ascend (`train`" in result.output
    # in a package too (Open-Reasoner-Zero's replay buffer, held-out round 19)
    write(tmp_path, "src/__init__.py", "")
    run_cli("--write", "--no-cache", ".")
    assert trainer.read_text() == before[trainer]


def test_a_conditional_build_blocks_nothing(tmp_path, run_cli):
    model = write(tmp_path, "model.py", MODEL.replace("timex_cuda = load(", "if USE:\n    timex_cuda = load("))
    write(tmp_path, "train.py", "import model\n\nif __name__ == '__main__':\n    model.make(1)\n")
    run_cli("--write", "--no-cache", ".")
    assert 'device="npu"' in model.read_text()


def test_a_script_whose_main_block_imports_it_and_a_build_on_both_sides_block_too(tmp_path, run_cli):
    """RWKV-v4's train.py imports its trainer inside `if __name__ == "__main__":`; RWKV-v7's
    src/model.py builds one CUDA kernel or another, on both sides of an `if`."""
    model = write(tmp_path, "src/model.py", MODEL.replace(
        'timex_cuda = load(name="timex", sources=["cuda/timex_op.cpp", "cuda/timex_cuda.cu"])\n',
        'if H100:\n    load(name="a", sources=["a.cu"])\nelse:\n    load(name="b", sources=[f"b.cu"])\n'))
    train = write(tmp_path, "train.py", "import torch\n\nif __name__ == '__main__':\n    from src.model import make\n"
                                        "    torch.cuda.set_device(0)\n")
    before = {p: p.read_text() for p in (model, train)}
    run_cli("--write", "--no-cache", ".")
    assert {p: p.read_text() for p in before} == before


def test_a_cog_predictor_of_a_gpu_image_is_left(tmp_path, run_cli):
    """MGM's and BLIP's predict.py: Replicate's Cog builds them into a CUDA image (cog.yaml
    `gpu: true`); without it, the same predictor is migrated."""
    predict = write(tmp_path, "predict.py", "import torch\nfrom cog import BasePredictor\n\n\n"
                                            "class Predictor(BasePredictor):\n    def setup(self):\n"
                                            "        self.model = torch.nn.Linear(2, 2).cuda()\n")
    write(tmp_path, "train.py", "import torch\n")
    cog = write(tmp_path, "cog.yaml", "build:\n  gpu: true\n  python_version: '3.11'\npredict: predict.py:Predictor\n")
    before = predict.read_text()
    result = run_cli("--write", "--no-cache", ".")
    assert predict.read_text() == before and "is a Cog predictor" in result.output
    cog.write_text("build:\n  gpu: false\npredict: predict.py:Predictor\n")
    run_cli("--write", "--no-cache", ".")
    assert ".npu()" in predict.read_text()
