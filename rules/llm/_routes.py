"""The switches of the LLM stack that the Python, shell and config rules of this
family report, and the Ascend route of each (one table, so a launcher option,
its config key and its keyword argument say the same thing). Plain data: no
front end is imported from here."""

from __future__ import annotations

_BNB = ("no released bitsandbytes wheel has an Ascend backend (0.50.2 checked; LLaMA-Factory builds it from source "
        "for NF4 QLoRA on NPU): drop the quantization and train LoRA on a bf16 model")
_BNB_OPTIM = ('use --optim adamw_torch_fused (torch.optim.AdamW(fused=True), implemented by torch_npu) or adamw_torch')
_LIGER = ("liger-kernel 0.8.5 has an Ascend backend for cross-entropy, fused linear cross-entropy, layer/RMS norm, "
          "RoPE and SwiGLU only (with triton-ascend): pin it and check the model's patches, or pass False")
COMPILE = ("accelerate's DynamoBackend has no NPU member (accelerate 1.15.0 checked), so HF/accelerate cannot select "
           "torch_npu's npu backend (torchair): turn the compile switch off and call torch.compile(model, "
           'backend="npu") in the script, or keep inductor after installing triton-ascend; see NPU914')
#: transformers' OptimizerNames backed by bitsandbytes (training_args.py)
BNB_OPTIMIZERS = frozenset({
    "adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit", "paged_adamw_32bit", "ademamix_8bit", "paged_ademamix_8bit",
    "paged_ademamix_32bit", "lion_8bit", "lion_32bit", "paged_lion_8bit", "paged_lion_32bit", "rmsprop_bnb",
    "rmsprop_bnb_8bit", "rmsprop_bnb_32bit",
})

#: option -> (what it does when on, the Ascend route); the option is reported when truthy
#: (or, for valued options, for the values listed in VALUED).
FLAGS = {
    "--use_liger": ("patches the model with Liger's Triton kernels (InternVL)", _LIGER),
    "--use_liger_kernel": ("patches the model with Liger's Triton kernels (transformers)", _LIGER),
    "--enable_liger_kernel": ("patches the model with Liger's Triton kernels (LLaMA-Factory)", _LIGER),
    "--use_8bit_adam": ("uses bitsandbytes' AdamW8bit (diffusers' training examples)",
                        "drop it: the script falls back to torch.optim.AdamW (8 bytes of state per parameter)"),
    "--load_in_4bit": ("quantizes the model with bitsandbytes", _BNB),
    "--load_in_8bit": ("quantizes the model with bitsandbytes", _BNB),
    "--use_flash_attention_2": ("asks transformers for the CUDA flash-attn package", "use --attn_implementation sdpa"),
    "--torch_compile": ("compiles the model with inductor (Triton kernels for GPUs) unless a backend is given",
                        COMPILE),
}
VALUED = {
    "--optim": (BNB_OPTIMIZERS, "is a bitsandbytes optimizer", _BNB_OPTIM),
    "--quantization_bit": (None, "quantizes the model (ChatGLM: cpm_kernels CUDA kernels; LLaMA-Factory: bitsandbytes)",
                           ("drop it on Ascend and run in fp16/bf16 (LLaMA-Factory: NF4 only with a source-built "
                            "bitsandbytes Ascend backend)")),
    "--bits": (frozenset({"4", "8"}), "quantizes the model with bitsandbytes (LLaVA's QLoRA launchers)", _BNB),
    "--fp8_backend": (frozenset({"torchao", "te", "msamp", "auto"}), "trains in FP8",
                      "Atlas A2/A3 have no FP8 matmul: drop --fp8 and train in bf16"),
    "--infer_backend": (frozenset({"vllm", "sglang"}), "serves with an engine built for CUDA",
                        "vllm: install the vllm-ascend plugin; sglang: use huggingface or vllm (vllm-ascend)"),
    "--quantization": (frozenset({"awq", "gptq", "bitsandbytes", "fp8", "marlin"}), "selects CUDA quantization kernels",
                       "serve the bf16 model, or a quantization vllm-ascend supports"),
    "--mixed_precision": (frozenset({"fp8"}), "trains in FP8 (accelerate: Transformer Engine, MS-AMP or torchao)",
                          "Atlas A2/A3 have no FP8 matmul: use --mixed_precision bf16"),
    "--dynamo_backend": (frozenset({"inductor", "INDUCTOR", "cudagraphs", "CUDAGRAPHS", "tensorrt", "TENSORRT"}),
                         "compiles with a GPU backend (accelerate's torch.compile switch)", COMPILE),
    "--torch_compile_backend": (frozenset({"inductor", "cudagraphs", "tensorrt"}), "compiles with a GPU backend", COMPILE),
}
