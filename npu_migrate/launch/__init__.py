"""``npu-migrate launch``: launch artifacts for a migrated entry script.

One plan (:mod:`.plan`: the entry point and its arguments, nodes, cards per node,
image, ...) from flags or ``[tool.npu-migrate.launch]``, rendered by one module per
target under :mod:`.targets`:

- ``torchrun`` / ``torch-npu-run``: a node launcher (single or multi-node);
- ``ranktable``: one process per card with ``RANK_TABLE_FILE``/``RANK_ID``/``DEVICE_ID``;
- ``modelarts``: a ModelArts training-job boot script (the boot command is in its header);
- ``volcano``: a ``batch.volcano.sh/v1alpha1`` Job that runs the torchrun launcher per node;
- ``ascendjob``: a MindCluster AscendJob that runs the ranktable launcher per node against
  the ranktable the Ascend Operator generates.

:mod:`.artifacts` compares what would be written with what exists (dry-run diff,
``--check``) and writes atomically (``--write``), never through a link out of the
project. Every shell launcher sources CANN's ``set_env.sh`` where needed, checks the node
first with ``python -m npu_runtime.preflight`` (``NPU_PREFLIGHT=0`` skips it) and restarts
by exit class (``npu_runtime.exitcodes``) after printing ``npu_runtime.diagnose``'s verdict.
"""
