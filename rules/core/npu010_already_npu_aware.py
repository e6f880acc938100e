"""NPU010: code that already handles NPU is left alone."""

from npu_migrate.python.rule import Example, Rule


class AlreadyNpuAware(Rule):
    id = "NPU010"
    impact = "informational"
    name = "already-npu-aware"
    summary = "CUDA code in an if/elif chain (or conditional expression) that already has an NPU branch is left unchanged"
    fixable = False
    rationale = """
Many libraries already branch on NPU (deepspeed, transformers, accelerate, mmengine,
timm, ultralytics): `if is_torch_npu_available(): ... elif torch.cuda.is_available(): ...`.
Rewriting the CUDA branch would turn it into a second NPU branch and break the
library on GPUs. The engine therefore drops every fix and finding inside an
`if`/`elif`/`else` chain, or a conditional expression, whose test mentions NPU
(`npu`, `torch_npu`, `is_npu_available()`, ...), and reports the lines it left
alone under this id instead, so nothing is silently skipped.

Two shapes around such chains are left alone too:

- `if` statements right next to each other form one chain: `if kind == 'cuda': ...`
  followed by `if kind == 'npu': ...` handles the NPU as an `elif` would, and
  rewriting the first would duplicate the second;
- a flag tested in such a chain: `self.on_gpu = device.type == 'cuda' and
  torch.cuda.is_available()` next to `self.on_npu = ...`, then `if self.on_gpu:
  torch.cuda.Stream() elif self.on_npu: torch.npu.Stream()`. Rewriting the flag's
  value into an NPU test would send the NPU into the CUDA branch (a crash), so the
  assignment keeps its CUDA test and is reported here. Any NPU test in the chain
  counts for a flag (also `elif self.on_npu:`), since the flag itself still holds
  CUDA code to rewrite.

A module in a folder named for the NPU inside its project (ms-swift's
`swift/model/npu_patch/`, liger's `ops/backends/_ascend/`, `ascend/`) is written for Ascend
(a file's own name is not enough: `npu_aware_probe.py` may hold CUDA code to migrate):
its CUDA calls are the fallback where `torch.npu` is missing (`if hasattr(torch, "npu"):
... return torch.cuda.current_device()`), and it is left alone as a whole. The path is
taken from the project root (the folder that holds `pyproject.toml`, `setup.py`, `.git`
...), so a checkout under `/home/npu/` does not count.

The project's own CUDA twins of its Ascend code are left alone too (held-out round 15,
Open-Sora-Plan, which keeps both):

- a file beside its Ascend sibling by name (`nccl_checkpoint_engine.py` beside
  `hccl_checkpoint_engine.py`, `train_gpu.sh` beside `train_npu.sh`,
  `Dockerfile.cuda` beside `Dockerfile.npu`), or in a folder (up to three above it,
  never above the project's root) beside its Ascend twin (`scripts/gpu/` beside
  `scripts/npu/`): nothing in it is rewritten or reported but one line here, whatever
  its type (Python, shell, Dockerfile, config, requirements);
- a function beside its Ascend twin in the same file (`init_gpu_env` beside
  `init_npu_env`, chosen by whether torch_npu imports): rewriting the CUDA one (`nccl`
  to `hccl`) would break that path and add nothing to the Ascend one.

A project that already runs on Ascend through torch_npu's run-time patcher (a module of
its own imports `torch_npu.contrib.transfer_to_npu`, as Open-Sora-Plan's `npu_config`
does) has, in every file that imports that module at any depth (through packages'
`__init__` files too), its `torch.cuda.X` calls, `.cuda()`, `"cuda"` and integer devices
and NCCL backend mapped at run time on Ascend: those rewrites (NPU101, NPU103, NPU104,
NPU105, NPU201, NPU301) serve nothing there and are left alone, reported once per file
here. The rest (the TF32 switches, `map_location`, CUDA_VISIBLE_DEVICES, the runtime)
is still migrated: the patcher does not map it. To migrate the source instead, drop the
patcher's import and run npu-migrate again.

Device-type lists in code that adds the PrivateUse1 backend itself
(`kinds = ["cuda", "xpu"]; kinds.append(torch._C._get_privateuse1_backend_name())`)
already include the NPU once torch_npu is imported: NPU104 leaves their `"cuda"`.

This rule has no visitor: the engine applies it to the other rules' edits.
"""
    examples = (
        Example(
            "import torch\n"
            "if is_torch_npu_available():\n"
            "    device = torch.device('npu')\n"
            "elif torch.cuda.is_available():\n"
            "    device = torch.device('cuda')\n"
        ),
    )
