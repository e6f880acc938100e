"""Cluster-stack rules for Python (Ray, vLLM, MindSpeed, CUDA-only libraries)."""
