"""Ray's names for Ascend devices, as the Ray wheel itself has them (plain data,
shared by the Python and shell rules of this family).

Checked in the ray 2.60.0 wheel (``ray-2.60.0-cp311-cp311-manylinux2014_x86_64.whl``):

* ``ray/_private/accelerators/npu.py``: ``NPUAcceleratorManager.get_resource_name()``
  returns ``"NPU"``; the visible devices are read from and set through
  ``ASCEND_RT_VISIBLE_DEVICES``;
* ``ray/_private/resource_and_label_spec.py`` (``_get_current_node_accelerator``):
  the count of an accelerator other than the GPU is ``resources.get("NPU")`` (what
  ``ray start --resources`` and ``ray.init(resources=...)`` give), else detected;
* ``ray/_common/ray_option_utils.py``: ``num_gpus`` is the resource ``"GPU"``;
  ``resources`` may not name ``"GPU"``/``"CPU"`` but may name ``"NPU"``;
* ``ray/runtime_context.py``: ``RuntimeContext.get_accelerator_ids()`` returns
  ``Dict[str, List[str]]`` keyed by resource name (``[str(id) for id in ...]``);
* ``ray/_private/worker.py``: ``get_gpu_ids()`` returns ``Union[List[int], List[str]]``:
  ints unless ``CUDA_VISIBLE_DEVICES`` was set when the worker started;
* ``ray/scripts/scripts.py``: ``ray start --num-gpus`` (int) and ``--resources`` (a
  JSON dictionary of resource name to quantity).
"""

from __future__ import annotations

RESOURCE = "NPU"
SOURCE = "ray 2.60.0: ray/_private/accelerators/npu.py names Ascend devices \"NPU\""
IDS_CALL = 'get_runtime_context().get_accelerator_ids()["NPU"]'
