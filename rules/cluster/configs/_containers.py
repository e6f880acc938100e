"""Facts shared by the container-file rules: how an Ascend container gets its NPUs
(plain data). Sources: Ascend Docker Runtime's user guide (MindCluster,
"Usage on the Docker Client": ``docker run -e ASCEND_VISIBLE_DEVICES=0 ...``) and
vllm-ascend's quick start (the device nodes and driver mounts of a plain
``docker run``)."""

from __future__ import annotations

DEVICES = ("/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
MOUNTS = ("/usr/local/dcmi", "/usr/local/bin/npu-smi", "/usr/local/Ascend/driver/lib64",
          "/usr/local/Ascend/driver/version.info", "/etc/ascend_install.info")
ROUTE = (
    "Ascend containers get their NPUs as device nodes, not a GPU reservation: with Ascend Docker Runtime set "
    "`runtime: ascend` and `ASCEND_VISIBLE_DEVICES=0-7` in the environment; without it list the devices ("
    + ", ".join(DEVICES) + ", one /dev/davinciN per NPU) and mount the driver (" + ", ".join(MOUNTS) + ")"
)
