"""Held-out round 20's wrong edits, one family per test (TinyZero's verl workers and vendored
vLLM, EasyContext's ring attention, CosyVoice's launchers and pinned torch, llama-moe's
device list). Each test fails on the engine before the round's fixes."""

from __future__ import annotations

from npu_migrate.pipeline.facts import ProjectFacts

from ._files import write

ACTOR = "import torch\nfrom flash_attn.bert_padding import pad_input\n\n\nclass Actor:\n    pass\n"
WORKERS = """import torch


class Worker:
    def __init__(self):
        torch.distributed.init_process_group(backend="nccl")

    def init_model(self):
        from pkg.actor import Actor
        self.actor = Actor()
        self.model = self._build().cuda()

    def _build(self):
        return torch.nn.Linear(2, 2).to("cuda")

    def update(self, data):
        data = data.to("cuda")
        return self.actor.update(data)

    def evaluate(self, data):
        torch.cuda.synchronize()
        return self.model(data.cuda())
"""


def _repo(tmp_path):
    """A repository (its ``.git`` marks the project root, as in every held-out tree)."""
    (tmp_path / ".git").mkdir(exist_ok=True)


def _tree(tmp_path, workers=WORKERS):
    _repo(tmp_path)
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/actor.py", ACTOR)
    return write(tmp_path, "pkg/workers.py", workers)


def test_functions_that_import_a_module_that_cannot_import_are_left(tmp_path, run_cli):
    workers = _tree(tmp_path)
    result = run_cli("--write", "--no-cache", ".")
    text = workers.read_text()
    # init_model imports pkg.actor (flash-attn at import); update reads self.actor, which only
    # init_model sets; _build is called only by init_model; evaluate reads self.model; then
    # every method but __init__ fails, so __init__'s process group serves nothing either
    assert 'self.model = self._build().cuda()' in text and 'to("cuda")' in text and "data.cuda()" in text
    assert 'backend="nccl"' in text and "torch.cuda.synchronize()" in text
    for name in ("init_model", "update", "_build", "evaluate", "__init__"):
        assert f"NPU011 `{name}` cannot run on Ascend" in result.output, name


def test_a_method_that_sets_what_it_reads_is_migrated(tmp_path, run_cli):
    workers = _tree(tmp_path, WORKERS.replace("    def evaluate(self, data):\n",
                                              "    def evaluate(self, data):\n        self.model = torch.nn.Identity()\n"))
    run_cli("--write", "--no-cache", ".")
    text = workers.read_text()
    assert "torch.npu.synchronize()" in text and "data.npu()" in text  # evaluate runs
    assert 'backend="hccl"' in text  # so __init__ serves it
    assert 'data.to("cuda")' in text  # update still reads self.actor


def test_an_import_under_try_is_no_failure(tmp_path, run_cli):
    workers = _tree(tmp_path, WORKERS.replace("        from pkg.actor import Actor\n",
                                              "        try:\n            from pkg.actor import Actor\n"
                                              "        except ImportError:\n            Actor = object\n"))
    result = run_cli("--write", "--no-cache", ".")
    assert "cannot run on Ascend" not in result.output
    assert 'data.to("npu")' in workers.read_text()


def test_a_module_in_a_package_whose_init_cannot_import_is_left(tmp_path, run_cli):
    # EasyContext: easy_context/__init__.py imports ring-flash-attention; the modules of its
    # namespace folders (no __init__.py) are imported through it
    _repo(tmp_path)
    write(tmp_path, "easy_context/__init__.py", "from .zigzag.patch import apply\nfrom .seqpar.attn import run\n")
    write(tmp_path, "easy_context/zigzag/patch.py", "from ring_flash_attn import zigzag_ring_flash_attn_func\n"
                                                   "def apply():\n    pass\n")
    attn = write(tmp_path, "easy_context/seqpar/attn.py", "import torch\nfrom .comm import send\n\n\ndef run(x):\n"
                                                        "    return send(x.cuda())\n\n\nif __name__ == '__main__':\n"
                                                        "    run(torch.zeros(1))\n")
    write(tmp_path, "easy_context/seqpar/comm.py", "def send(x):\n    return x\n")
    result = run_cli("--write", "--no-cache", ".")
    assert "x.cuda()" in attn.read_text()
    assert "part of the project's package `easy_context`" in result.output


def test_parent_package_edges_skip_scripts_run_by_path(tmp_path):
    sources = [(str(tmp_path / "pkg/__init__.py"), b"import flash_attn\n"),
               (str(tmp_path / "pkg/tool.py"), b"import torch\nif __name__ == '__main__':\n    pass\n"),
               (str(tmp_path / "pkg/lib.py"), b"import torch\n")]
    facts = ProjectFacts.scan(sources)
    assert facts.blocked_import(str(tmp_path / "pkg/lib.py")) is not None
    assert facts.blocked_import(str(tmp_path / "pkg/tool.py")) is None  # `python pkg/tool.py` imports no package


def test_exports_of_a_launcher_whose_scripts_cannot_import_are_left(tmp_path, run_cli):
    _repo(tmp_path)
    write(tmp_path, "train.py", "import torch\nfrom flash_attn.losses.cross_entropy import CrossEntropyLoss\n")
    launcher = write(tmp_path, "run.sh", "export PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:1024'\n\n"
                                         "accelerate launch train.py --batch-size 1\n")
    result = run_cli("--write", "--no-cache", ".")
    assert "PYTORCH_CUDA_ALLOC_CONF" in launcher.read_text()
    assert "`train.py`, the script this command runs, cannot be imported on Ascend" in result.output


def test_exports_stay_migrated_beside_a_launch_the_tool_cannot_follow(tmp_path, run_cli):
    _repo(tmp_path)
    write(tmp_path, "train.py", "import torch\nfrom flash_attn.losses.cross_entropy import CrossEntropyLoss\n")
    launcher = write(tmp_path, "run.sh", "export PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:1024'\n\n"
                                         "accelerate launch train.py\npython -m pkg.other\n")
    run_cli("--write", "--no-cache", ".")
    assert "PYTORCH_NPU_ALLOC_CONF" in launcher.read_text()


ENGINE_WORKER = """import torch
from vllm.model_executor.layers.linear import ColumnParallelLinear

WARM_UP = torch.ones(1).cuda()
torch.distributed.all_reduce(WARM_UP)
"""


def test_a_module_of_vllms_engine_is_left(tmp_path, run_cli):
    _repo(tmp_path)
    worker = write(tmp_path, "third_party/vllm_worker.py", ENGINE_WORKER)
    client = write(tmp_path, "rollout.py", "import torch\nfrom vllm import LLM, SamplingParams\n"
                                           "from vllm.distributed.parallel_state import destroy_model_parallel\n\n"
                                           "scores = torch.zeros(1).cuda()\n")
    result = run_cli("--write", "--no-cache", ".")
    assert "torch.ones(1).cuda()" in worker.read_text()
    assert "extends vLLM's engine (it imports `vllm.model_executor.layers.linear`" in result.output
    assert "torch.zeros(1).npu()" in client.read_text()  # vLLM's client API and its clean-up calls: migrated


def test_vllms_parallel_state_module_import_is_engine_code(tmp_path, run_cli):
    state = write(tmp_path, "parallel_state.py", "import torch\nimport vllm.distributed.parallel_state as ps\n\n\n"
                                                 "def init(n):\n    return torch.zeros(n, device='cuda')\n")
    run_cli("--write", "--no-cache", ".")
    assert "device='cuda'" in state.read_text()


def test_a_statement_with_an_unproven_device_string_is_left_whole(tmp_path, run_cli):
    script = write(tmp_path, "select.py", "import torch\n\n"
                                          'devices = ["cuda:" + str(i) for i in range(torch.cuda.device_count())]\n'
                                          "print(torch.cuda.device_count())\n")
    result = run_cli("--write", "--no-cache", ".")
    text = script.read_text()
    assert 'devices = ["cuda:" + str(i) for i in range(torch.cuda.device_count())]' in text
    assert "print(torch.npu.device_count())" in text
    assert "NPU108" in result.output


def test_a_device_mesh_follows_the_backend(tmp_path, run_cli):
    script = write(tmp_path, "mesh.py", "import torch\n\n\ndef setup(n):\n"
                                        '    torch.distributed.init_process_group(backend="nccl")\n'
                                        "    from torch.distributed.device_mesh import init_device_mesh\n"
                                        "    return init_device_mesh('cuda', mesh_shape=(n,), mesh_dim_names=['fsdp'])\n")
    run_cli("--write", "--no-cache", ".")
    text = script.read_text()
    assert 'backend="hccl"' in text and "init_device_mesh('npu'" in text


def test_autocast_stand_ins_for_a_torch_before_2_4(tmp_path, run_cli):
    # CosyVoice pins torch==2.3.1, whose autocast asks the backend module for its state
    write(tmp_path, "requirements.txt", "torch==2.3.1\n")
    model = write(tmp_path, "model.py", "import torch\n\n\ndef job(m, x, fp16):\n"
                                        "    with torch.cuda.amp.autocast(fp16):\n        return m(x)\n")
    run_cli("--write", "--no-cache", ".")
    text = model.read_text()
    assert "torch.npu.is_autocast_enabled = lambda: False" in text
    assert "torch.npu.set_autocast_enabled = torch.npu.set_autocast_dtype = lambda value: None" in text


def test_no_extra_autocast_stand_ins_for_a_newer_torch(tmp_path, run_cli):
    write(tmp_path, "requirements.txt", "torch>=2.5\n")
    model = write(tmp_path, "model.py", "import torch\n\n\ndef job(m, x, fp16):\n"
                                        "    with torch.cuda.amp.autocast(fp16):\n        return m(x)\n")
    run_cli("--write", "--no-cache", ".")
    text = model.read_text()
    assert "get_amp_supported_dtype = list" in text and "is_autocast_enabled = lambda" not in text


def test_modules_that_import_each_other_only_for_blocked_code_are_left(tmp_path):
    # verl's reward_model/megatron: its __init__ imports reward_model.py, which imports the
    # package back; only megatron_workers (which cannot import) uses them
    root = tmp_path
    sources = [(str(root / "pkg/__init__.py"), b""),
               (str(root / "pkg/actor.py"), b"import flash_attn\n"),
               (str(root / "pkg/workers.py"), b"from pkg.actor import A\nfrom pkg.rm.model import RM\n"),
               (str(root / "pkg/rm/__init__.py"), b"from .model import RM\n"),
               (str(root / "pkg/rm/model.py"), b"from pkg.rm import helpers\nimport torch\n"),
               (str(root / "pkg/rm/helpers.py"), b"import torch\n")]
    facts = ProjectFacts.scan(sources)
    for rel in ("pkg/rm/model.py", "pkg/rm/__init__.py"):
        assert facts.blocked_import(str(root / rel)) is not None, rel
    # a cycle that nothing blocked uses is not left
    alone = ProjectFacts.scan([(p, d) for p, d in sources if not p.endswith("workers.py")])
    assert alone.blocked_import(str(root / "pkg/rm/model.py")) is None


def test_a_state_key_named_cuda_does_not_hold_back_its_value(tmp_path, run_cli):
    # composer's and ms-swift's RNG checkpoints: the key is a name in a file, the value torch's
    script = write(tmp_path, "rng.py", "import torch\n\n\ndef state():\n    rng_state = {}\n"
                                       "    rng_state['cuda'] = torch.cuda.get_rng_state()\n    return rng_state\n\n\n"
                                       "print(state())\n")
    run_cli("--write", "--no-cache", ".")
    assert "rng_state['cuda'] = torch.npu.get_rng_state()" in script.read_text()


def test_an_attribute_a_base_class_of_the_file_sets_is_not_never_set(tmp_path, run_cli):
    workers = _tree(tmp_path, WORKERS.replace("class Worker:\n", "class Base:\n    def __init__(self):\n"
                                              "        self.model = torch.nn.Identity()\n\n\nclass Worker(Base):\n"))
    run_cli("--write", "--no-cache", ".")
    assert "torch.npu.synchronize()" in workers.read_text()  # evaluate reads self.model, which Base sets
