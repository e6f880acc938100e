"""NPU011: a CUDA test in front of CUDA-only code stays a CUDA test."""

from npu_migrate.python.rule import Example, Rule


class CudaKernelGate(Rule):
    id = "NPU011"
    impact = "informational"
    name = "cuda-kernel-gate"
    summary = "A CUDA test that keeps CUDA-only code (a compiled kernel, Triton, DataParallel...) from other devices is left unchanged"
    fixable = False
    rationale = """
Real code dispatches on the device: a compiled kernel for CUDA tensors, a
pure-PyTorch path for everything else.

```python
if boxes.is_cuda:
    keep = _C.nms(boxes, scores, threshold)        # CUDA kernel
else:
    keep = torchvision.ops.nms(boxes, scores, threshold)
```

Rewriting `boxes.is_cuda` to `boxes.is_npu` would send NPU tensors into the CUDA
kernel, which fails (or, for DataParallel on several NPUs, fails at the first
forward). Such a test is a *gate*: it stays exactly as it is, so on NPU it is
false and the fallback runs, and this finding names the CUDA-only code and the
path NPU takes instead. Add an NPU branch before the test to accelerate that path
(a torch_npu fused op such as `torch_npu.npu_nms_with_mask`, or an Ascend C kernel).

CUDA-only code: a compiled extension (a `_C` module, `amp_C`, modules named like
`*_cuda`, `lib.gpu.*`), Triton kernels (also a module of this project that is
Triton code, such as a `kernels` package), CuPy/PyCUDA, custom `torch.ops`
operators, `torch._C._cuda_*`, `CUDAExtension`, every package an NPU9xx rule
reports (flash-attn, xformers, apex, bitsandbytes...), `nn.DataParallel` that
NPU510 does not rewrite (the functional `data_parallel`, subclasses, nested
wrappers, or NPU510 not selected), and the functions and autograd Functions of
the file that call them without a device test of their own.

DataParallel that NPU510 rewrites is not CUDA-only: it becomes
`npu_runtime.data_parallel(...)`, which runs on NPU, so the test in front of it
is rewritten like any other (`if device == 'cuda':` becomes `if device == 'npu':`,
second example below). The same DataParallel with `--ignore NPU510` keeps its
CUDA test and is reported here and by NPU913.

Gates: the CUDA test (`x.is_cuda`, `x.device.type == "cuda"`,
`torch.cuda.is_available()`, `torch.cuda.device_count() > 1`) of an `if` or a
conditional expression whose guarded side uses CUDA-only code; of a flag tested
later (`fast = t.is_cuda` ... `if fast:`); of a predicate function that is tested,
or registered next to a CUDA-only implementation
(`register_implementation(op, checker=is_supported, execution_transform=kernel)`).
Also a gate: a test whose branch only picks another system's CUDA values (`elif
device.type == "cuda": providers = ["CUDAExecutionProvider", ...]`, `["CUDAExecutionProvider",
...] if gpu else [...]`: onnxruntime's provider, not a torch device); and the same test
of the same value elsewhere in a function that keeps one (`weights = "fp16.onnx" if
device.type == "cuda" else ...` after that `elif`), so the function decides the device
one way (inside functions only: a script's module-level tests are about many things). An operator registered for CUDA only (`@torch.library.custom_op(...,
device_types="cuda")`) is CUDA-only code; a function's decorators are not a device test
of its body. So are torch's own CUDA attention kernels that torch_npu does not register
for the NPU: `torch.nn.attention.varlen.varlen_attn` (it runs `aten._flash_attention_forward`
or cuDNN's) and `torch.ops.aten._flash_attention_forward`-like calls.
The code a kept gate guards runs only on CUDA, so its own `torch.cuda` calls and device
values stay CUDA's too (`(torch.cuda.get_device_name(d), torch.cuda.get_device_capability(d))
if d.type == "cuda" else None` is left whole).
A test whose branch also moves things to the device (`model.cuda()`,
`torch.cuda.set_device`) and has no `else` is rewritten as usual, since skipping
it on NPU would lose that work; the CUDA-only code in it stays reported by its
own rule (NPU913 for DataParallel, ...).

**CUDA-only mechanisms.** A device test whose condition or branch names CUDA IPC
(`_platform_supports_cuda_ipc()`: device memory shared across processes), CUDA
graphs (`"cuda_graph" in variant`, `CUDAGraph`), NVSHMEM or NVML is a check for that
mechanism and stays a CUDA test (torchrl's collectors and its Dreamer benchmark):
torch_npu's graphs and IPC are other APIs, so on NPU the code takes the path it takes
for any device without the mechanism.

**A `__main__` block that checks or times CUDA kernels.** A module-level `if __name__ ==
"__main__":` block that imports a package of CUDA kernels, Triton code or a compiled CUDA
extension (`from causal_conv1d import causal_conv1d_fn`, `from mamba_ssm.ops.triton...`)
to compare an op with it keeps its device code as CUDA's, is reported once, and gets no
`npu_runtime.install()` (NPU701): it is a kernel check, not a training entry point
(lingua's `apps/mamba/component/*_compilable.py`).

**Another library's NCCL communicator.** A function that hands tensors to one (vLLM's
`PyNcclCommunicator` and `NCCLWeightTransferEngine`, CuPy's `nccl`, an RL framework's
`self._nccl_group` built from them) keeps all its device code as CUDA's, and is
reported once: `weight.to("cuda:0")` before `self._nccl_group.broadcast(weight)`
would otherwise feed NPU memory to a CUDA communicator (found on torchrl's vLLM and
SGLang weight sync). A name counts where it is read, not where it is set to `None`;
torch's own NCCL process groups and their options are not such a communicator (HCCL
replaces them). On Ascend the path is ported by hand to the library's HCCL
communicator (vllm-ascend's `PyHcclCommunicator`).

**Modules of the project's own kernels** are left alone as a whole and reported once:
Triton, Helion, CuPy, CUTLASS or cuTile code (the project facts' CUDA-only files) in a
file whose path inside its project is about kernels (`unsloth/kernels/rms_layernorm.py`,
`liger_kernel/ops/...`, a `_cutile/` backend) and that has no `__main__` block, or only
a self-test one in a package module that does not train (mamba's
`mamba_ssm/ops/triton/mamba3/mamba3_mimo_utils.py` checks its kernels there). Their
streams, grid sizing (`multi_processor_count`, `warp_size`) and devices exist for those
kernels; a training script that defines a kernel is still migrated. FP4 formats (NVFP4,
MXFP4) count as CUDA-only words like FP8 (no FP4 matmul on Atlas A2/A3).

**Tests behind the project's own CUDA skip marks.** A project's testing helpers often
define its GPU marks once (OLMo-core's `olmo_core/testing/utils.py`: `has_cuda =
torch.cuda.is_available()`, `GPU_MARKS = (pytest.mark.gpu, pytest.mark.skipif(not
has_cuda, ...))`, `def requires_gpu(func)` applying them). Whether the tests they mark run
on Ascend is decided there: the project facts migrate such helper modules
(`npu_migrate/pipeline/skip_marks.py`) and keep the names whose skip condition still tests
CUDA afterwards (there, `has_cuda` also gates a compute-capability probe, so it stays), or
names a package with no Ascend build (`has_flash_attn_2`). A test module's tests decorated
with such a name imported from the project, and the module-level helpers only those tests
use (`run_save_and_load_torch_fsdp_model`, handed to `run_distributed_test`), keep their
devices and are reported once each: they are skipped on Ascend, and rewriting them served
nothing (held-out round 13: 112 of OLMo-core's 115 test hunks). Where the helper's flag is
rewritten to an NPU test, the marked tests run on the NPU and are migrated as usual.

**A device chosen by a test of the NCCL backend** (`torch.device("cuda") if "nccl" in backend
else torch.device("cpu")`) stays CUDA's where that test's `"nccl"` is not rewritten (NPU201
reports it): rewritten alone, it would pair the NPU with NCCL. Where NPU201 rewrites the
test (the compared value holds a rewritten backend, or `dist.get_backend()`), the device
moves with it.

**Modules that cannot be imported on Ascend** are left alone and reported once: a module
or script whose module-level code (not under `try`/`if`, not in a function) imports a
package with no Ascend build, itself or through module-level imports of the project's own
modules (LongLoRA's scripts import `llama_attn_replace`, which imports flash-attn): flash-attn and its compiled parts,
Transformer Engine, `apex.transformer`/`apex.contrib` (Apex for Ascend builds amp and the
fused optimizers only), TensorRT, PyCUDA, DALI, and the SSM/MoE/attention kernel packages
(mamba-ssm, causal-conv1d, DeepEP, grouped_gemm...), or a compiled CUDA extension by name
(`xentropy_cuda_lib`). Nothing in such a module runs on Ascend until that import is ported,
so its device edits would serve nothing (held-out rounds: trlx's NeMo models, which import
`apex.transformer`; TinyLlama's `lit_gpt` model, which imports flash-attn). The import's
own finding (NPU901, NPU903...) says how to port it; once ported, a second run migrates the
rest. Scripts too (this reverses an earlier choice that migrated them because their
imports are the first thing an owner ports): three held-out rounds labelled their edits
needless, as they serve nothing until that port, and the second run after it migrates
them. Triton, DeepSpeed, bitsandbytes and xformers import on Ascend and do not
count.

**Test modules of kernels** are left alone as a whole and reported once: a test
module (`test_*.py`, `*_test.py`, `conftest.py`, a file under `tests/`) whose folders
below `tests/` or whose name is about kernels (`kernel`, `triton`, `fused`,
`cutlass`, `cute`: axolotl's `tests/kernels/test_gemma4_fused_rope.py`), or that
imports Triton or a module so named (`from mypkg.kernels.lora import ...`,
`liger_kernel.ops`), or a module of the project that is Triton/Helion code (axolotl's
`tests/monkeypatch/test_flash_attn_d512.py` imports `monkeypatch.attention.flash_attn_d512`
inside its tests), or whose own `pytestmark` skips it without CUDA for a kernel's sake
(`reason="varlen_attn needs CUDA"`). Its skip gates often give no reason but "CUDA required", and
its device strings exist to feed the kernels; kept as CUDA, the tests are skipped on
Ascend instead of running NPU tensors into CUDA kernels (found on axolotl: nine such
gates; on liger-kernel and axolotl most needless hunks were in these tests).

Two more shapes count as CUDA-only code behind a CUDA test:

- **compute-capability probes**: `torch.cuda.get_device_capability()` and
  `torch.cuda.get_device_properties(...)` whose `.major`/`.minor` is read (on the
  call or on the name it is assigned to). On NPU the first returns None and the
  properties have no major/minor, so the probe itself stays a CUDA call (reported
  here) and the CUDA test in front of it, also an earlier `x.is_cuda and ...` of the
  same test, stays a CUDA test: NPU takes the generic path.
- **a CUDA-only package named by the guard**: `assert has_apex and
  torch.cuda.is_available(), 'APEX and CUDA required'`, `assert
  torch.cuda.is_available(), 'bitsandbytes needs CUDA'`, `if not
  torch.cuda.is_available(): raise RuntimeError('xformers needs a GPU')`: a flag,
  a string in the test, or the assertion's / `raise`'s message names apex,
  bitsandbytes (bnb), xformers, Triton, flash-attn, TensorRT... (also an `assert`
  whose following code uses CUDA-only code), a flag named after such a package
  (`use_apex = ... torch.cuda.is_available()`), or a conditional expression
  whose CUDA side is such a package's name (`"onnxruntime-gpu" if cuda else
  "onnxruntime"`). On NPU such a guard stops with its own message, as it does on
  any machine without CUDA, instead of letting the NPU into code that cannot run
  there.
- **state set only behind a kept gate**: attributes that only the guarded code
  assigns (`self.cuda_config = ...` after `if not torch.cuda.is_available():
  return`) keep their default on NPU, so a later test that picks them
  (`self.cuda_config if q.is_cuda else self.cpu_config`) stays a CUDA test too.
- **a class that is CUDA-only code as a whole** (`npu_migrate/python/kernel_classes.py`):
  one that subclasses such a library's class (`class Linear8bitLt(bnb.nn.Linear8bitLt)`:
  every object runs bitsandbytes' kernels), or the flash-attention variant of a class
  of the same file, as vendored Hugging Face modeling files have it (`class
  LlamaFlashAttention2(LlamaAttention)`, named `Flash...` and calling flash-attn;
  transformers' mapping of `flash_attention_2` onto NPU fusion attention covers its
  own classes, not a copy). Every edit inside the class is left, reported once; on
  Ascend the file's other variant (sdpa, eager) is the one to select.


**The project's own kernels** (held-out round 19, RWKV and Latte): a function that hands its
tensors to a JIT-built extension, a compiled `_C`/`*_cuda` module, Triton code or a custom
operator of the project on every call (in its own statements, a `with`, or both sides of an
`if`), and has no device test of its own, keeps its device code, reported once: RWKV's
autograd `WKV` allocates `torch.empty(..., device='cuda')` for `wkv_cuda.forward`, and
`RUN_CUDA` moves its inputs with `.cuda()` for `WKV.apply`. A function that builds CUDA
sources into a module global (`global _plugin` ... `_plugin = custom_ops.get_plugin(...,
sources=[..., 'bias_act.cu'], extra_cuda_cflags=...)`) is CUDA-only code, so `x.device.type
== 'cuda' and _init()` in front of it is a gate. A module that builds CUDA sources when
imported cannot be imported on Ascend at all: it, the modules that import it and those only
they import are left, one line each.
This rule has no visitor: the engine applies it to the device rules' edits
(`npu_migrate/python/cuda_only.py` holds the classifier). The other device
rules still rewrite the code inside the branch.
"""
    examples = (
        Example(
            "import torch\n"
            "from maskrcnn_benchmark import _C\n"
            "def nms(boxes, scores, threshold):\n"
            "    if boxes.is_cuda:\n"
            "        return _C.nms(boxes, scores, threshold)\n"
            "    return nms_cpu(boxes, scores, threshold)\n"
        ),
        Example(
            "import torch.nn as nn\n"
            "def forward(self, input):\n"
            "    if input.is_cuda and self.ngpu > 1:\n"
            "        return nn.parallel.data_parallel(self.main, input, range(self.ngpu))\n"
            "    return self.main(input)\n"
        ),
        Example(
            "import torch.nn as nn\n"
            "if device == 'cuda':\n"
            "    net = nn.DataParallel(net)\n",
            "import npu_runtime\n"
            "import torch.nn as nn\n"
            "\n"
            "npu_runtime.init_data_parallel()\n"
            "if device == 'npu':\n"
            "    net = npu_runtime.data_parallel(net)\n",
        ),
    )
