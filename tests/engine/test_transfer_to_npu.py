"""A project that imports torch_npu's ``transfer_to_npu`` has its CUDA calls, devices and
NCCL backend mapped at run time on Ascend: in the files that import that module (at any
depth), those rewrites serve nothing and are left alone, reported once (NPU010); the
others stay (held-out round 15: Open-Sora-Plan's ``npu_config`` made 70 hunks needless)."""

from __future__ import annotations

from npu_migrate.pipeline.facts import ProjectFacts

from ._files import write

CONFIG = ("import torch\n\ntry:\n    import torch_npu\n    from torch_npu.contrib import transfer_to_npu\n"
          "except ImportError:\n    torch_npu = None\n")
TRAIN = ("import torch\n\ntry:\n    from proj.npu_config import npu_config\nexcept ImportError:\n    npu_config = None\n\n\n"
         "def main():\n    torch.cuda.set_device(0)\n    x = torch.zeros(2).cuda()\n"
         "    torch.backends.cuda.matmul.allow_tf32 = True\n    return torch.load('ckpt.pt')\n\n\n"
         "if __name__ == '__main__':\n    main()\n")


def test_files_under_transfer_to_npu_keep_what_it_maps(tmp_path, run_cli):
    write(tmp_path, "proj/__init__.py", "")
    write(tmp_path, "proj/npu_config.py", CONFIG)
    train = write(tmp_path, "proj/train.py", TRAIN)
    result = run_cli("--write", "--no-cache", ".")
    text = train.read_text()
    assert "torch.cuda.set_device(0)" in text and ".cuda()" in text  # mapped at run time
    assert "allow_hf32" in text and "map_location" in text  # not mapped by transfer_to_npu
    assert "`npu_config.py`, which this file imports, imports torch_npu's transfer_to_npu" in result.output


def test_a_package_import_reaches_the_patcher(tmp_path):
    """``import proj.models`` runs ``proj/models/__init__.py``, which imports the patcher."""
    files = {
        "proj/__init__.py": "",
        "proj/npu_config.py": CONFIG,
        "proj/models/__init__.py": "from proj.npu_config import npu_config\n",
        "proj/models/unet.py": "import torch\n",
        "scripts/sample.py": "import proj.models\n",
        "scripts/alone.py": "import torch\n",
    }
    paths = {rel: write(tmp_path, rel, text) for rel, text in files.items()}
    facts = ProjectFacts.scan([(str(p), p.read_bytes()) for p in paths.values()])
    patcher = str(paths["proj/npu_config.py"])
    assert facts.patched_by(str(paths["scripts/sample.py"])) == patcher
    assert facts.patched_by(str(paths["proj/npu_config.py"])) == patcher
    assert facts.patched_by(str(paths["scripts/alone.py"])) is None
    assert facts.patched_by(str(paths["proj/models/unet.py"])) is None  # imports nothing of it


def test_without_the_patcher_the_same_file_is_migrated(tmp_path, run_cli):
    write(tmp_path, "proj/__init__.py", "")
    write(tmp_path, "proj/npu_config.py", "import torch\n")
    train = write(tmp_path, "proj/train.py", TRAIN)
    run_cli("--write", "--no-cache", ".")
    assert "torch.npu.set_device(0)" in train.read_text()
