"""The output survives the linters a project runs next to npu-migrate (real ruff).

A pre-commit configuration with both hooks runs npu-migrate, then
``ruff check --fix``. ruff must find nothing to fix in what npu-migrate wrote
(the import of torch_npu is not deleted as unused, inserted imports are where
isort puts them, new strings use the file's quotes), and npu-migrate ``--check``
must pass afterwards. A file that lost its ``import torch_npu`` anyway (written
by an older version, or edited by hand) is caught by ``--check``.
"""

from __future__ import annotations

import subprocess
import sys

import libcst as cst
import pytest

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source
from npu_migrate.python.imports import NPU_IS_CUDA, cpu_stand_ins, guard_text

ALL = Settings(selection=Selection.create(["ALL"]))
TIMEOUT = 120

#: Sorted by isort's rules and lint-free; every import is used.
SORTED_SCRIPT = '''\
"""Train a model."""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=int(os.environ.get("EPOCHS", "1")))
    args = parser.parse_args()
    model = nn.Linear(4, 2).cuda()
    data = DataLoader(torchvision.datasets.FakeData(), batch_size=8)
    for _ in range(args.epochs):
        for batch in data:
            loss = model(batch[0].cuda()).sum() + float(np.zeros(1)[0])
            loss.backward()
    torch.cuda.synchronize()
'''

SINGLE_QUOTED = '''\
import torch

parser.add_argument('--amp', action='store_true')
model = Net().to(0)
scaler = torch.cuda.amp.GradScaler(enabled=args.amp)
with torch.cuda.amp.autocast():
    loss = model(batch.to(0))
'''

#: A module-level DataParallel script (kuangliu/pytorch-cifar's shape), sorted and lint-free:
#: the migration adds `from torch.utils.data.distributed import DistributedSampler` and
#: statements right after the import block.
SORTED_DATA_PARALLEL_SCRIPT = '''\
"""Train CIFAR10."""

import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

device = "cuda" if torch.cuda.is_available() else "cpu"
loader = DataLoader(make_dataset(), batch_size=128, shuffle=True)
net = make_model().to(device)
if device == "cuda":
    net = nn.DataParallel(net)
for epoch in range(int(os.environ.get("EPOCHS", "1"))):
    for x, y in loader:
        loss = nn.functional.cross_entropy(net(x.to(device)), y.to(device))
        loss.backward()
'''


def ruff(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd, check=False
    )


def migrated(source: str) -> str:
    result = migrate_source("script.py", source.encode(), ALL)
    assert result.error is None and result.new_source is not None
    return result.new_source.decode()


@pytest.mark.parametrize("script", [SORTED_SCRIPT, SORTED_DATA_PARALLEL_SCRIPT])
def test_the_inputs_are_lint_clean(tmp_path, script):
    """The premise: ruff has nothing to say about the sorted scripts before migration."""
    path = tmp_path / "script.py"
    path.write_text(script)
    check = ruff("check", "--isolated", "--select", "I,F401", str(path))
    assert check.returncode == 0, check.stdout


@pytest.mark.parametrize("script", [SORTED_SCRIPT, SORTED_DATA_PARALLEL_SCRIPT])
def test_ruff_fix_keeps_the_migrated_script_as_it_is(tmp_path, script):
    path = tmp_path / "script.py"
    output = migrated(script)
    assert "\n" + guard_text(fallback=(NPU_IS_CUDA,)) + "\n" in output
    path.write_text(output)
    fixed = ruff("check", "--isolated", "--select", "I,F401", "--fix", str(path))
    assert fixed.returncode == 0, fixed.stdout
    assert path.read_text() == output, "ruff --fix changed the migrated file"


def test_new_strings_use_the_files_quotes(tmp_path):
    path = tmp_path / "script.py"
    output = migrated(SINGLE_QUOTED)
    assert "GradScaler('npu'" in output and ".to('npu:0')" in output
    path.write_text(output)
    check = ruff("check", "--isolated", "--select", "Q000", "--config", "lint.flake8-quotes.inline-quotes='single'",
                 str(path))
    assert check.returncode == 0, check.stdout


def test_pre_commit_sequence(tmp_path, run_cli):
    """npu-migrate --write, ruff check --fix, then npu-migrate --check: nothing left to do."""
    (tmp_path / "train.py").write_text(SORTED_SCRIPT)
    first = run_cli("train.py", "--write", "--no-cache")
    assert first.exit_code == 0, first.output
    fixed = ruff("check", "--isolated", "--select", "F401,I", "--fix", "train.py", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout
    assert "import torch_npu  # noqa: F401" in (tmp_path / "train.py").read_text()
    again = run_cli("train.py", "--check", "--no-cache")
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize("use", ["x = torch.zeros(2).npu()", "torch.npu.set_device(0)", "y = torch.ones(1).to('npu:0')",
                                 "dev = torch.device('npu')", "torch.distributed.init_process_group('hccl')"])
def test_check_flags_npu_code_whose_import_was_removed(tmp_path, run_cli, use):
    """ruff --fix deletes a bare `import torch_npu` (F401); --check must then fail and a
    normal run put the import back."""
    (tmp_path / "train.py").write_text(f"import torch\nimport torch_npu\n\n{use}\n")
    fixed = ruff("check", "--isolated", "--select", "F401", "--fix", "train.py", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout
    assert "torch_npu" not in (tmp_path / "train.py").read_text()
    check = run_cli("train.py", "--check", "--no-cache")
    assert check.exit_code == 1, check.output
    assert run_cli("train.py", "--write", "--no-cache").exit_code == 0
    fallback = tuple(cpu_stand_ins(use)) or ("pass",)
    assert (tmp_path / "train.py").read_text() == f"import torch\n\n{guard_text(fallback=fallback)}\n{use}\n"


@pytest.mark.parametrize("source", [
    "import torch\n\nif is_torch_npu_available():\n    torch.npu.set_device(0)\n",
    "import torch\n\nif device.type == 'npu':\n    torch.npu.set_device(device)\n",
    "import torch\n\nuse_npu = device.type == 'npu' and torch.npu.is_available()\n",
    "import torch\n\nif backend == 'hccl':\n    dev = torch.device('npu', torch.npu.current_device())\n",
    "import torch\n\n\nclass NPUAccelerator:\n    def sync(self):\n        torch.npu.synchronize()\n",
    "import torch\n\nself.is_npu = False\nif self.is_npu:\n    pass\n",
])
def test_library_code_that_only_runs_on_the_npu_is_not_flagged(source):
    """Libraries import torch_npu in one central place and call the NPU API only
    where they dispatch on the NPU; adding the import there would break them on GPUs."""
    result = migrate_source("lib.py", source.encode(), ALL)
    assert result.new_source is None and result.fixes == []


def test_a_test_that_uses_the_npu_api_itself_is_flagged():
    """`if torch.npu.is_available():` runs everywhere: it needs the import."""
    result = migrate_source("train.py", b"import torch\n\nif torch.npu.is_available():\n    x = 1\n", ALL)
    assert result.new_source == b"import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    torch.npu = torch.cuda\n\nif torch.npu.is_available():\n    x = 1\n"


#: An entry point that imports no torch (shakespeare-babbler's Hydra script, held-out
#: round of issue 21): the training is in the project's package.
HYDRA_ENTRY = '''\
import hydra

from mypkg.trainer import Trainer


@hydra.main(config_path="config", config_name="train", version_base=None)
def main(cfg):
    Trainer(cfg).train()


if __name__ == "__main__":
    main()
'''


@pytest.mark.timeout(TIMEOUT)
def test_npu_runtime_in_a_file_without_torch_keeps_the_import_blocks(tmp_path, run_cli):
    """In a file that imports no torch (a Hydra entry point), the guarded `import
    npu_runtime` goes after the file's imports, never into or between its blocks (a
    plain import went below `from mypkg.trainer import Trainer` once, and ruff's I001
    flagged the file)."""
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "trainer.py").write_text("class Trainer:\n    def __init__(self, cfg):\n        pass\n")
    (tmp_path / "train.py").write_text(HYDRA_ENTRY)
    premise = ruff("check", "--isolated", "--select", "I,F401", "train.py", cwd=tmp_path)
    assert premise.returncode == 0, premise.stdout
    written = run_cli("train.py", "--write", "--no-cache", "--entry", "train.py")
    assert written.exit_code == 0, written.output
    output = (tmp_path / "train.py").read_text()
    assert output.startswith("import hydra\n\nfrom mypkg.trainer import Trainer\n\ntry:\n    import npu_runtime\n"), output
    assert '__main__":\n    if npu_runtime is not None:\n        npu_runtime.install()\n    main()\n' in output
    check = ruff("check", "--isolated", "--select", "I,F401", "train.py", cwd=tmp_path)
    assert check.returncode == 0, check.stdout


def test_the_third_party_neighbour_skips_the_standard_library_and_the_project():
    from npu_migrate.python.imports import third_party_neighbour

    body = cst.parse_module("from __future__ import annotations\nimport os\nfrom . import x\nimport mypkg.a\n"
                            "from hydra import main\nimport yaml\n").body
    assert third_party_neighbour(body, lambda dotted: dotted.startswith("mypkg")) == "hydra"
    assert third_party_neighbour(body[:4], lambda dotted: dotted.startswith("mypkg")) is None


#: nanoGPT's shape: an import block that is not sorted (ruff reports one I001 on it
#: before migration); the guard must not split it into two blocks (two I001s).
UNSORTED_BLOCK = '''\
import os
import math

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group

from model import GPT

x = torch.zeros(2, device="cuda")
print(os, math, np, DDP, init_process_group, GPT, x)
'''

#: The bundled example's utils.py: an alias of torch.cuda imported at the top.
CUDA_ALIAS = '''\
import os
import random

import numpy as np
import torch
import torch.cuda as tc


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    tc.manual_seed_all(seed)
    os.environ.setdefault("X", "1")
'''


def _violations(path, *select: str) -> list[str]:
    check = ruff("check", "--isolated", "--select", ",".join(select), "--output-format", "concise", str(path))
    return sorted(line.split(":", 3)[3].split()[0] for line in check.stdout.splitlines() if line.count(":") >= 3)


@pytest.mark.parametrize("script", [UNSORTED_BLOCK, CUDA_ALIAS, SORTED_SCRIPT, SORTED_DATA_PARALLEL_SCRIPT])
def test_migration_adds_no_ruff_violation(tmp_path, script):
    """37.4: with ruff's E, F and I rules (and RUF100), the migrated file has no
    violation the original did not have."""
    before, after = tmp_path / "before.py", tmp_path / "after.py"
    before.write_text(script)
    after.write_text(migrated(script))
    assert _violations(after, "E", "F", "I", "RUF100") == _violations(before, "E", "F", "I", "RUF100")


def test_noqa_only_where_the_import_is_unused(tmp_path):
    """A file that uses the name torch_npu itself gets no `# noqa: F401` (RUF100)."""
    output = migrated("import torch\n\nx = torch.zeros(2).cuda()\ny = torch_npu.npu_rms_norm(x, x)\n")
    assert "    import torch_npu\n" in output and "noqa" not in output
    path = tmp_path / "f.py"
    path.write_text(output)
    assert ruff("check", "--isolated", "--select", "F401,RUF100", str(path)).returncode == 0


def test_an_import_that_needs_torch_npu_goes_under_the_guard(tmp_path):
    """`import torch.npu as tc` written by the migration needs torch_npu at import time:
    it moves into the guard, and without torch_npu the alias means torch.cuda, as
    before the migration; a second run changes nothing."""
    output = migrated(CUDA_ALIAS)
    assert ("try:\n    import torch_npu  # noqa: F401\n    from torch import npu as tc\n"
            "except ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n"
            "    from torch import cuda as tc\n") in output
    assert "import torch.npu" not in output and "import torch.cuda" not in output
    assert migrate_source("script.py", output.encode(), ALL).new_source is None


@pytest.mark.parametrize(("line", "expected"), [
    ("device = 'cuda'  # examples: 'cpu', 'cuda', 'cuda:0', 'cuda:1' etc., or try 'mps'\n",
     "device = 'npu'  # examples: 'cpu', 'npu', 'npu:0', 'npu:1' etc., or try 'mps'\n"),
    ("backend = 'nccl'  # 'nccl', 'gloo', etc.\n", "backend = 'hccl'  # 'hccl', 'gloo', etc.\n"),
    # prose is the reader's: only quoted values follow the rewrite
    ("device = 'cuda'  # run on cuda\n", "device = 'npu'  # run on cuda\n"),
    # a comment that names both values compares them: left as it is
    ("backend = 'nccl'  # 'nccl' or 'hccl'\n", "backend = 'hccl'  # 'nccl' or 'hccl'\n"),
])
def test_a_trailing_comment_listing_the_old_values_follows_the_rewrite(line, expected):
    output = migrated("import torch\n" + line + "torch.distributed.init_process_group(backend)\nx = torch.zeros(1, device=device)\n")
    assert expected in output


def test_the_comment_helper_pairs_literals_only_when_it_can():
    from npu_migrate.python.comments import update_comment

    assert update_comment("# 'cuda', \"cuda:1\", 'cudax', 'cuda:x'", {"cuda": "npu"}) == "# 'npu', \"npu:1\", 'cudax', 'cuda:x'"
    assert update_comment("# 'cuda'", {}) == "# 'cuda'"
