"""The cluster-scale LLM stack (NPU950-NPU979): Ray's resource requests, vLLM
and its Ascend plugin, Megatron-LM on MindSpeed, and the CUDA-only pieces of
that stack that have no Ascend path (DeepEP, NVSHMEM, symmetric memory,
flash-attn's compiled extensions, Lightning's accelerator, GPU reservations in
container files). One sub-package per front end, as ``rules/llm/``."""

FRONT_END = None
