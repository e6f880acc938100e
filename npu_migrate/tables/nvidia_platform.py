"""Signs in a launcher, an image or a job spec that it runs on NVIDIA's platform.

A file that names the NVIDIA platform it runs on (an NVIDIA or CUDA container image, a
Kubernetes ``nvidia.com/gpu`` resource, the NVIDIA container runtime, a preloaded NCCL
library or the EFA plugin of NCCL, NVIDIA's Nsight profiler, SkyPilot's ``accelerators: A100:4``) keeps running
there until that sign is ported, which the tool reports and never rewrites. Its CUDA and
NCCL variables are that platform's meanwhile: renamed for Ascend, they drop the setting on
the NVIDIA machines the file still runs on and give Ascend nothing (held-out round 26:
123 of awsome-distributed-training's hunks, in pods that request ``nvidia.com/gpu``,
Dockerfiles built on NGC and DLC images, Slurm jobs that preload ``libnccl.so``; round 25:
oumi's SkyPilot A100 jobs). The environment rules leave them, reported, as they leave the
variables of a script that asks ``nvidia-smi`` for its GPUs.
"""

from __future__ import annotations

import functools
import re

#: each sign, named by the group that finds it
_SIGN = re.compile(
    rb"(?P<resource>\bnvidia\.com/(?:gpu|mig-[\w.-]+))"
    rb"|(?P<runtime>\bruntimeClassName[\"']?[ \t]*:[ \t]*[\"']?nvidia\b)"
    rb"|(?P<image>\bnvcr\.io/[\w./:${}-]+|(?<![\w./-])nvidia/cuda[:@][\w.${}-]+"
    rb"|^[ \t]*FROM[ \t]+(?:--\S+[ \t]+)*\S*(?:[-_.:]cu1\d{1,2}(?=[-_.\s]|$)|[-_.:/]cuda)\S*)"
    rb"|(?P<preload>\bLD_PRELOAD=\S*libnccl)"
    rb"|(?P<container>\bNVIDIA_(?:VISIBLE_DEVICES|DRIVER_CAPABILITIES)\b)"
    rb"|(?P<plugin>\baws-ofi-nccl\b|/ofi-nccl\b)"
    rb"|(?P<profiler>\bnsys[ \t]+(?:profile|launch|start)\b|\bncu[ \t]+--)"
    rb"|(?P<accelerators>^[ \t]*accelerators[ \t]*:[ \t]*[\[{'\"]?[ \t]*(?:A100|A10G?|A800|H100|H200|H800|H20|V100|T4|"
    rb"L4|L40S?|B200|GB200|B100|P100|K80|A6000|A5000|A4000|RTX[\w-]*)(?:-\w+)?(?::\d+)?)",
    re.MULTILINE | re.IGNORECASE,
)

_WHAT = {
    "resource": "a Kubernetes NVIDIA GPU resource",
    "runtime": "the NVIDIA container runtime",
    "image": "an NVIDIA/CUDA container image",
    "preload": "a preloaded NCCL library",
    "container": "the NVIDIA container runtime's variable",
    "plugin": "NCCL's EFA plugin (aws-ofi-nccl)",
    "profiler": "NVIDIA's Nsight profiler",
    "accelerators": "a job that asks for NVIDIA GPUs by model",
}


@functools.lru_cache(maxsize=32)
def nvidia_platform(data: bytes) -> tuple[str, int] | None:
    """``(sign, line)``: what in ``data`` says the file runs on NVIDIA's platform (``"an
    NVIDIA/CUDA container image (`nvcr.io/nvidia/pytorch:24.01-py3`)"``) and its 1-based
    line; None when nothing does. Cached: every variable of a file asks about the same bytes."""
    found = _SIGN.search(data)
    if found is None:
        return None
    kind = found.lastgroup or "image"
    text = found.group(kind).decode("utf-8", "replace").strip()
    if kind == "image" and text.upper().startswith("FROM"):
        text = text.split()[-1]
    elif kind == "accelerators":
        text = text.split(":", 1)[1].strip(" \t[{'\"")
    shown = text if len(text) <= 60 else text[:57] + "..."
    return f"{_WHAT[kind]} (`{shown}`)", data.count(b"\n", 0, found.start()) + 1
