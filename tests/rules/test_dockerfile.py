"""The Dockerfile front end beyond the golden fixtures: properties over
generated Dockerfiles, --annotate, line endings, and what is not shell."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_migrate.dockerfile.engine import migrate
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings

ALL = Settings(selection=Selection.create(["ALL"]))
FIXTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "rules").glob("*/*.before.Dockerfile"))


def run(source: str | bytes, settings: Settings = ALL):
    data = source.encode() if isinstance(source, str) else source
    result = migrate("Dockerfile", data, settings)
    assert result.error is None
    return result


bases = st.sampled_from(["python:3.11-slim", "ubuntu:22.04", "debian:bookworm AS build",
                         "swr.cn-south-1.myhuaweicloud.com/ascendhub/cann:8.0.0-910b-ubuntu22.04-py3.10"])
prose = st.sampled_from(["built for cuda GPUs once", "NCCL_DEBUG=INFO", "--backend nccl", "nvidia-smi"])
commands = st.sampled_from(["pip install -r requirements.txt", "apt-get update", "python setup.py build",
                            "torchrun --nproc_per_node 2 train.py --backend hccl", "echo done",
                            "python train.py --device npu:0"])


@st.composite
def instruction(draw) -> str:
    form = draw(st.integers(0, 7))
    if form == 0:
        return f"FROM {draw(bases)}"
    if form == 1:
        return f"ENV HCCL_CONNECT_TIMEOUT={draw(st.integers(120, 7200))} LANG=C.UTF-8"
    if form == 2:
        return f"ENV ASCEND_RT_VISIBLE_DEVICES {draw(st.sampled_from(['0', '0,1', '$DEVICES']))}"
    if form == 3:
        return f"RUN {draw(commands)} && \\\n    # {draw(prose)}\n    {draw(commands)}"
    if form == 4:
        return f'LABEL note="{draw(prose)}"'
    if form == 5:
        return f"# {draw(prose)}"
    if form == 6:
        return f'CMD ["python", "train.py", "--note", "{draw(prose)}"]'
    return f"RUN <<EOF\n{draw(commands)}\necho '{draw(prose)}'\nEOF"


@st.composite
def dockerfile(draw) -> bytes:
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    body = "\n".join([f"FROM {draw(bases)}", *draw(st.lists(instruction(), max_size=10))])
    return (body + "\n").replace("\n", newline).encode()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dockerfile())
def test_dockerfiles_without_cuda_isms_are_left_byte_identical(data):
    result = run(data)
    assert result.new_source is None
    assert result.fixes == [] and result.findings == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FIXTURES + [FIXTURES[0].parents[1] / "NPU821" / "bases.unchanged.Dockerfile"]),
                min_size=1, max_size=2, unique=True), st.lists(instruction(), max_size=6))
def test_a_second_run_changes_nothing_and_reports_the_same(fixtures, extra):
    data = b"".join(p.read_bytes() for p in fixtures) + "".join(f"{i}\n" for i in extra).encode()
    first = run(data)
    second = run(first.new_source if first.new_source is not None else data)
    assert second.new_source is None
    assert [(f.line, f.rule, f.message) for f in second.findings] == [(f.line, f.rule, f.message) for f in first.findings]


def test_annotate_goes_above_the_instruction_and_is_idempotent():
    source = b"FROM nvidia/cuda:12.1.0-base-ubuntu22.04\r\nRUN apt-get update && \\\r\n    nvidia-smi -L\r\n"
    annotate = Settings(selection=Selection.create(["ALL"]), annotate=True)
    out = run(source, annotate).new_source
    lines = out.split(b"\r\n")
    assert lines[0].startswith(b"# npu-migrate: NPU821 ") and lines[1].startswith(b"FROM nvidia/cuda")
    assert lines[2].startswith(b"# npu-migrate: NPU805 ") and lines[3] == b"RUN apt-get update && \\"
    assert run(out, annotate).new_source is None


def test_a_suppression_comment_covers_a_continued_instruction():
    source = "FROM python:3.11\n# npu-migrate: ignore[NPU801]\nENV CUDA_VISIBLE_DEVICES=0 \\\n    CUDA_LAUNCH_BLOCKING=1\n"
    assert run(source).new_source is None


def test_shell_form_after_a_powershell_shell_instruction_is_not_shell():
    source = 'FROM mcr.microsoft.com/windows/servercore\nSHELL ["powershell", "-Command"]\nRUN $env:CUDA_VISIBLE_DEVICES="0"\n'
    assert run(source).new_source is None
    back = source + 'SHELL ["/bin/bash", "-c"]\nRUN export CUDA_VISIBLE_DEVICES=0\n'
    assert run(back).new_source.endswith(b"RUN export ASCEND_RT_VISIBLE_DEVICES=0\n")


def test_crlf_continuation_before_a_comment_line():
    """Found by the property above: the grammar split this RUN in two."""
    source = (b"FROM python:3.11-slim\r\nRUN pip install -r requirements.txt && \\\r\n"
              b"    # built for cuda GPUs once\r\n    nvidia-smi\r\n")
    assert run(source).new_source == source.replace(b"    nvidia-smi", b"    npu-smi info")


def test_a_cuda_image_of_a_torch_series_without_torch_npu_suggests_the_nearest_pair():
    # issue 37: there is no torch-npu 2.15, so "torch-npu==2.15.*" would not install
    from npu_migrate.rules.dockerfile.npu821_cuda_base_image import suggestion

    assert "nearest: `torch==2.14.0` with `torch-npu==2.14.*`" in suggestion("pytorch/pytorch:2.15.0-cuda12.8-cudnn9-runtime")
    assert suggestion("pytorch/pytorch:2.5.0-cuda12.4-cudnn9-runtime").endswith("pip install torch==2.5.* torch-npu==2.5.*")
