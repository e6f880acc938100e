"""The shared "reaches torch" analysis (npu_migrate/python/reaches_torch.py) and the
FlashAttention decision from project facts (npu_migrate/pipeline/attention.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_migrate.pipeline.attention import (
    Attention,
    admits_only_npu_flash_attention,
    decide,
    packing_configured,
)
from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source

SELECT = Settings(selection=Selection.create(["NPU101", "NPU103", "NPU104", "NPU108", "NPU011", "NPU100"]))


def run(source: str):
    result = migrate_source("t.py", source.encode(), SELECT)
    return result.new_source.decode() if result.new_source is not None else None, result.findings


@pytest.mark.parametrize("source", [
    # another system's platform name
    "import triton\nok = triton.runtime.driver.active.get_current_target().backend == 'cuda'\n",
    "import triton\ndef dev():\n    return triton.runtime.driver.active.get_current_target().backend\n"
    "IS_NVIDIA = dev() == 'cuda'\n",
    # a fallback taken only without an accelerator
    "import torch\nfrom torch._utils import _get_available_device_type\n"
    "def f():\n    device_type = _get_available_device_type() or 'cuda'\n    return torch.device(device_type)\n",
    # a library's own flag
    "import torch\nfrom mergekit.options import MergeOptions\nMergeOptions(cuda=torch.cuda.is_available())\n",
    # a helper this file cannot read, a library whose device is not a torch device
    "from utils import pick_device\nif pick_device() == 'cuda':\n    pass\n",
    "from vllm import LLM\nllm = LLM(model='m', device='cuda')\n",
    # a local name called device whose uses reach nothing of torch
    "def f(cfg):\n    device = 'cuda'\n    cfg.launch(device)\n",
])
def test_left_unchanged_and_reported(source):
    new, findings = run(source)
    assert new is None
    assert findings, "the string or value must be reported, not dropped silently"


@pytest.mark.parametrize("source,expected", [
    ("import torch\nx = torch.zeros(2, device='cuda')\n", "device='npu'"),
    ("import torch\ndef f(x):\n    device = 'cuda'\n    return x.to(device)\n", "device = 'npu'"),
    ("import torch\nfrom transformers import AutoModel\nm = AutoModel.from_pretrained('p', device='cuda')\n",
     "device='npu'"),
    ("import torch\ndef pick_device():\n    return 'cuda' if torch.cuda.is_available() else 'cpu'\n"
     "if pick_device() == 'cuda':\n    pass\n", "if pick_device() == 'npu'"),
    ("import torch\nclass O:\n    def __init__(self, cuda):\n        self.cuda = cuda\n"
     "O(cuda=torch.cuda.is_available())\n", "torch.npu.is_available()"),
    ("DEVICE = 'cuda'\n", "DEVICE = 'npu'"),  # a config module's exported constant
])
def test_reaching_torch_is_rewritten(source, expected):
    new, _ = run(source)
    assert new is not None and expected in new


@pytest.mark.parametrize("specifiers,expected", [
    (">=4.53.3", True), ("==5.15", True), ("~=4.51.0", True), ("==4.53.*", True), (">=4.53.3,<6;==5.15", True),
    ("==4.37.2", False), (">=4.30", False), ("<5", False), (">=4.53.3;==4.37.2", False), ("", None),
])
def test_transformers_specifier(specifiers, expected):
    assert admits_only_npu_flash_attention(specifiers) is expected


def test_transformers_specifier_comes_from_any_dependency_file():
    facts = ProjectFacts.scan([
        ("setup.py", b'setup(install_requires=[\n    "transformers>=4.53.3",\n    "torch",\n])\n'),
        ("requirements.txt", b"transformers[torch]==5.15\naccelerate\n"),
        ("train.py", b"import transformers  # transformers==4.37.2 in a comment of code is not a requirement\n"),
    ])
    assert sorted(facts.transformers_specifier.split(";")) == ["==5.15", ">=4.53.3"]
    assert "transformers=" in facts.key()


@pytest.mark.parametrize("name,data,expected", [
    # lerobot: the pin is an extra of its own, in an inline array
    ("pyproject.toml", b'[project]\nname = "x"\ndependencies = ["torch"]\n[project.optional-dependencies]\n'
                       b'transformers-dep = ["transformers>=5.4.0,<5.6.0"]\n', ["<5.6.0,>=5.4.0"]),
    ("pyproject.toml", b'[project]\ndependencies = ["torch>=2", "transformers[torch]==4.53.3"]\n', ["==4.53.3"]),
    ("pyproject.toml", b'[dependency-groups]\ndev = ["transformers~=4.51.0"]\n', ["~=4.51.0"]),
    ("pyproject.toml", b'[tool.poetry.dependencies]\ntransformers = "^4.53"\n', ["<5.0,>=4.53"]),
    ("setup.py", b'setup(install_requires=["torch", "transformers>=4.53.3", "peft"])\n', [">=4.53.3"]),
    # a pyproject TOML cannot read still gives what its lines say
    ("pyproject.toml", b'[project\ndependencies = [\n  "transformers>=4.53.3",\n]\n', [">=4.53.3"]),
    ("pyproject.toml", b'[project]\nname = "transformers-dep"\n', []),
    # HALOs' install.sh: the pin is in a `pip install` line of a shell script
    ("install.sh", b"set -e\npip install transformers==4.51.3\n# pip install transformers==4.0\n", ["==4.51.3"]),
    ("setup_env.sh", b'uv pip install -U "transformers[torch]>=4.53,<5" peft\necho transformers==1\n', [">=4.53,<5"]),
])
def test_transformers_requirements_in_inline_lists_and_tables(name, data, expected):
    facts = ProjectFacts.scan([(name, data)])
    assert [s for s in facts.transformers_specifier.split(";") if s] == expected


@pytest.mark.parametrize("data,code,expected", [
    (b"packing: true\n", False, True), (b"padding_free: true\n", False, True), (b'"packing": true', False, True),
    (b"--packing \\\n", False, True), (b"--padding_free True", False, True), (b"packing: false\n", False, False),
    (b"--packing False", False, False), (b"collator = DataCollatorWithFlattening()", True, True),
    (b"if data_args.packing:\n", True, True), (b"model = load()", True, False),
])
def test_packing(data, code, expected):
    assert packing_configured(data, code=code) is expected


def test_decision_order():
    assert decide(">=4.53.3", b"packing: true") is Attention.KEEP  # FA2 runs on the NPU there
    assert decide("==4.37.2", b"packing: true") is Attention.PACKED
    assert decide("==4.37.2", b"lr: 1e-5") is Attention.REWRITE
    assert decide("", b"lr: 1e-5") is Attention.REWRITE


def test_a_device_name_assigned_from_itself_is_followed_once():
    """ultralytics' select_device: `device = str(device).lower()`, then `device.replace(...)`
    in a loop, then `if device == "cuda":`. Following the name's values went round the cycle
    until Python's recursion limit, and the whole file was reported as too deeply nested."""
    body = "".join(f"    device = device.replace({c!r}, '')\n" for c in "abcdefghij")
    source = ("import torch\n\n\ndef select_device(device=''):\n    device = str(device).lower()\n" + body +
              "    if device == 'cuda':\n        device = '0'\n    return torch.device(device)\n")
    result = migrate_source("t.py", source.encode(), SELECT)
    assert result.error is None


_CYCLE_VALUES = ["{a}", "{b}", "{a} and torch.cuda.is_available()", "{b} or 'cuda'",
                 "{a} if {b} else 'cuda'", "{a} == 'cuda' and {b}", "({a}, {b})[0]"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from(_CYCLE_VALUES)), min_size=1, max_size=5),
       st.sampled_from(["torch.cuda.synchronize()", "x = torch.zeros(1, device={a})", "x = x.to({b})"]))
def test_names_assigned_from_themselves_or_each_other_end_the_analysis(assignments, use):
    """``flag = flag and torch.cuda.is_available()`` (vjepa2's ``gpu_timer``) and
    ``a = b; b = a`` are read to an end: the file is migrated, never an error (it was
    "too deeply nested")."""
    lines = [f"    {target} = {value.format(a='a', b='b')}" for target, value in assignments]
    source = ("import torch\n\n\ndef f(a='cuda', b=None, x=None):\n" + "\n".join(lines)
              + f"\n    if a and b:\n        {use.format(a='a', b='b')}\n    return a\n")
    result = migrate_source("t.py", source.encode(), SELECT)
    assert result.error is None, (source, result.error)


_EVAL = ("import torch\n\nfrom generate import _load_model, _log\n\n\ndef main(path):\n    device = 'cuda'\n"
         "    model = _load_model(path, device, torch.bfloat16)\n    torch.cuda.synchronize()\n    return model\n\n\n"
         "def report():\n    target = 'cuda'\n    _log(target)\n\n\n"
         "if __name__ == '__main__':\n    report()\n    main('model.pt')\n")


def test_a_device_name_passed_to_a_function_of_another_project_module_moves_with_it(tmp_path, run_cli):
    """gpt-fast's eval.py: `device = 'cuda'` handed positionally to `_load_model` of the
    project's generate.py is rewritten with the `torch.cuda.synchronize()` beside it (left,
    the model loaded on CUDA and the NPU was synchronized). A name that is no device word
    stays reported, and so does the same call to a module outside the project."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "gptfast"\n')
    (tmp_path / "generate.py").write_text("import torch\n\n\ndef _load_model(path, device, precision):\n"
                                          "    return torch.load(path).to(device=device, dtype=precision)\n\n\n"
                                          "def _log(x):\n    print(x)\n")
    (tmp_path / "eval.py").write_text(_EVAL)
    result = run_cli("eval.py", "--no-cache")
    assert "+    device = 'npu'" in result.output
    assert "eval.py:14:" in result.output and "NPU108" in result.output  # target = 'cuda'
    (tmp_path / "generate.py").unlink()
    result = run_cli("eval.py", "--no-cache")
    assert "+    device = 'npu'" not in result.output and "eval.py:7:" in result.output
