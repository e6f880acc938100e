"""CUDA -> Ascend facts shared by every front end (Python, shell, config files, ...).

One table per subject, so a fact lives in one place and the Python rules and the
other front ends agree:

* ``env_vars``: environment variables (``CUDA_VISIBLE_DEVICES``, ``NCCL_*``,
  ``TORCH_NCCL_*``) and their Ascend counterparts, or what to do instead;
* ``backends``: process-group backend strings (``nccl`` -> ``hccl``, ``cuda:nccl`` -> ``npu:hccl``),
  and the argument and config keys that hold one;
* ``devices``: device strings (``cuda:0`` -> ``npu:0``) and the keys that hold one;
* ``packages``: PyPI distributions that only work on NVIDIA GPUs, CUDA wheel indexes.
* ``torch_npu_releases``: the torch-npu releases on PyPI per torch series (the pairs
  NPU850/NPU860 can pin; docs/compatibility.md lists them).

Nothing here imports libcst or torch.
"""
