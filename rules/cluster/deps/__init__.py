"""Cluster-stack rules for dependency files (vllm-ascend next to vllm)."""

FRONT_END = "deps"
