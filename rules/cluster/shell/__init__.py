"""Cluster-stack rules for shell launchers (``ray start``, ``vllm serve``, Megatron launchers)."""

FRONT_END = "shell"
