"""Shared by the cluster-stack Python rules: a CUDA-only package whose top-level name
a project may also use for a module of its own (``rotary_emb``) is left alone where
the project has that module; Ray requests in the GPU branch of code that picks the
resource name itself are left alone too."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import string_value
from npu_migrate.rules.unsupported._common import CudaOnlyPackage


class ExternalCudaOnly(CudaOnlyPackage):
    """:class:`CudaOnlyPackage` that skips imports the project itself can satisfy."""

    def is_target(self, qualified: str) -> bool:
        return super().is_target(qualified) and not self.ctx.facts.is_project_module(self.ctx.path, qualified)


def _tests_gpu(test: cst.BaseExpression) -> str | None:
    """``"=="`` or ``"!="`` for a test of a value against Ray's resource name ``"GPU"``
    (``platform.ray_device_key == "GPU"``), else None."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if "GPU" not in (string_value(test.left), string_value(target.comparator)):
        return None
    if isinstance(target.operator, cst.Equal):
        return "=="
    if isinstance(target.operator, cst.NotEqual):
        return "!="
    return None


def asserts_gpu_resource(test: cst.BaseExpression) -> bool:
    """``platform.ray_device_key == "GPU"``: vLLM's platform attribute naming Ray's resource
    compared equal to ``"GPU"`` (an ``assert`` that stops the job on Ascend, where vllm-ascend's
    platform says ``"NPU"``); ``... == "GPU" or "NPU"`` (always true) is not this."""
    if _tests_gpu(test) != "==":
        return False
    assert isinstance(test, cst.Comparison)
    other = test.comparisons[0].comparator if string_value(test.left) is not None else test.left
    return isinstance(other, cst.Attribute) and other.attr.value == "ray_device_key"


def in_gpu_branch(ctx, node: cst.CSTNode) -> bool:
    """``node`` sits in the GPU branch of code that picks Ray's resource name itself:
    the body of ``if X == "GPU":`` (or the ``else`` of ``!= "GPU"``) when the chain has
    another branch, or of ``a if X == "GPU" else b`` (ROLL's executors: ``num_gpus=0.01``
    there, ``resources={platform.ray_device_key: 0.01}`` in the ``else``, where vllm-ascend's
    platform names ``"NPU"``). The code already asks for the NPU on Ascend: renaming the
    GPU branch's request breaks GPUs and changes nothing on the NPU."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.IfExp)):
            operator = _tests_gpu(ancestor.test)
            other = ancestor.orelse is not None if isinstance(ancestor, cst.If) else True
            if other and ((operator == "==" and child is ancestor.body) or (operator == "!=" and child is ancestor.orelse)):
                return True
        child = ancestor
    return False


def compares_resource_name(module: cst.Module) -> bool:
    """The module tests a value against Ray's ``"GPU"`` (``key == "GPU"``): its resource
    requests are chosen per platform, so requests it builds from that value are not
    CUDA-only."""

    class _Find(cst.CSTVisitor):
        found = False

        def visit_Comparison(self, node: cst.Comparison) -> bool:
            if _tests_gpu(node):
                self.found = True
            return not self.found

    finder = _Find()
    module.visit(finder)
    return finder.found


_UNSEARCHED = object()


def left_gpu_request(ctx) -> cst.Arg | None:
    """A ``num_gpus=`` request of the file whose value is not a number literal, or a Ray Train
    ``use_gpu=`` that is not ``False`` (found once per file): NPU950 and NPU953 report such a
    request instead of rewriting it, so the actors still
    ask Ray for ``"GPU"``, and every other Ray name of the file must stay Ray's GPU one with
    it: a bundle renamed ``{"NPU": 1}`` beside ``.options(num_gpus=num_gpus)`` can never be
    placed (align-anything's vLLM engines, held-out round 24), ``ray.get_gpu_ids()`` is what
    such an actor reads, and a total counted as ``"NPU"`` counts what nobody asks for
    (ReaLHF's controller, held-out round 23)."""
    found = getattr(ctx, "_left_gpu_request", _UNSEARCHED)
    if found is _UNSEARCHED:
        found = []

        class _Find(cst.CSTVisitor):
            def visit_Arg(self, node: cst.Arg) -> None:
                if (node.keyword is not None and node.keyword.value == "num_gpus"
                        and not isinstance(node.value, (cst.Integer, cst.Float))):
                    found.append(node)
                elif (node.keyword is not None and node.keyword.value == "use_gpu"
                      and not (isinstance(node.value, cst.Name) and node.value.value == "False")):
                    # Ray Train's `ScalingConfig(use_gpu=True)`, which NPU953 reports and leaves:
                    # its workers still ask for "GPU" (ArcticTraining's Ray launcher counted the
                    # cluster's "NPU" for them, held-out round 25)
                    found.append(node)

        ctx.module.visit(_Find())
        found = found[0] if found else None
        ctx._left_gpu_request = found  # searched once per file; dies with the context
    return found


def left_request_text(ctx, request: cst.Arg) -> str:
    """```num_gpus=<value>` (line N)`` (or ``use_gpu=``) for a message."""
    shown = f"{request.keyword.value}=" + " ".join(ctx.module.code_for_node(request.value).split())
    return f"`{shown}` (line {ctx.position(request).start.line})"
