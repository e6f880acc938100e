"""Shared by the AMP rules (NPU3xx): what each ``torch.cuda.amp`` name becomes, and the
argument rewrites that turn a CUDA-only call into the device-generic ``torch.amp`` one."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import string_literal

CUDA_AMP = "torch.cuda.amp"

#: torch.cuda.amp name -> (kind, torch.amp name). Every target exists in torch 2.13.
TARGETS: dict[str, tuple[str, str]] = {
    "torch.cuda.amp.autocast": ("autocast", "torch.amp.autocast"),
    "torch.cuda.amp.autocast_mode.autocast": ("autocast", "torch.amp.autocast_mode.autocast"),
    "torch.cuda.amp.GradScaler": ("scaler", "torch.amp.GradScaler"),
    "torch.cuda.amp.grad_scaler.GradScaler": ("scaler", "torch.amp.grad_scaler.GradScaler"),
    "torch.cuda.amp.custom_fwd": ("custom", "torch.amp.custom_fwd"),
    "torch.cuda.amp.custom_bwd": ("custom", "torch.amp.custom_bwd"),
    "torch.cuda.amp.autocast_mode.custom_fwd": ("custom", "torch.amp.autocast_mode.custom_fwd"),
    "torch.cuda.amp.autocast_mode.custom_bwd": ("custom", "torch.amp.autocast_mode.custom_bwd"),
}
#: modules that may be imported under an alias, and their torch.amp counterparts
MODULES = {
    "torch.cuda.amp": "torch.amp",
    "torch.cuda.amp.autocast_mode": "torch.amp.autocast_mode",
    "torch.cuda.amp.grad_scaler": "torch.amp.grad_scaler",
}
#: torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)
AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")

_NO_SPACE = cst.SimpleWhitespace("")


def in_amp(qualified: str | None) -> bool:
    return qualified is not None and (qualified == CUDA_AMP or qualified.startswith(CUDA_AMP + "."))


def _keyword(name: str, value: cst.BaseExpression, comma=cst.MaybeSentinel.DEFAULT) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=_NO_SPACE, whitespace_after=_NO_SPACE),
        comma=comma,
    )


def with_first_arg(call: cst.Call, first: cst.Arg) -> cst.Call:
    if call.args:
        # one argument per line stays one argument per line
        after = call.whitespace_before_args
        if not isinstance(after, cst.ParenthesizedWhitespace):
            after = cst.SimpleWhitespace(" ")
        first = first.with_changes(comma=cst.Comma(whitespace_after=after))
    return call.with_changes(args=[first, *call.args])


def autocast_args_ok(call: cst.Call) -> bool:
    """Positional arguments can be turned into keywords (no ``*args`` and at most three)."""
    positional = [a for a in call.args if a.keyword is None and a.star != "**"]
    if any(a.star == "*" for a in positional):
        return False
    return len(positional) <= len(AUTOCAST_POSITIONAL)


def _npu(quote: str, device: str = "npu") -> cst.SimpleString:
    return string_literal(device, quote)


def autocast_call(call: cst.Call, quote: str = '"', device: str = "npu") -> cst.Call:
    """``autocast(True, torch.bfloat16)`` -> ``autocast("npu", enabled=True, dtype=torch.bfloat16)``:
    torch.amp.autocast's second parameter is ``dtype``, not ``enabled``."""
    args = []
    position = 0
    for arg in call.args:
        if arg.keyword is None and not arg.star:  # `**kwargs` passes through
            arg = _keyword(AUTOCAST_POSITIONAL[position], arg.value, arg.comma)
            position += 1
        args.append(arg)
    return with_first_arg(call.with_changes(args=args), cst.Arg(_npu(quote, device)))


def scaler_call(call: cst.Call, quote: str = '"', device: str = "npu") -> cst.Call:
    """``GradScaler(init_scale)`` -> ``GradScaler("npu", init_scale)``: the device comes
    first in torch.amp.GradScaler and the other parameters keep their order."""
    return with_first_arg(call, cst.Arg(_npu(quote, device)))


def custom_call(call: cst.Call, quote: str = '"', device: str = "npu") -> cst.Call:
    """``custom_fwd(cast_inputs=x)`` -> ``custom_fwd(device_type="npu", cast_inputs=x)``
    (``device_type`` is keyword-only; it goes after any positional argument)."""
    index = 0
    for i, arg in enumerate(call.args):
        if arg.keyword is None and arg.star != "**":
            index = i + 1
    new = _keyword("device_type", _npu(quote, device))
    args = list(call.args)
    if index < len(args):
        new = new.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    elif args:
        last = args[-1]
        if last.comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:  # keep a trailing comma after the new argument
            new = new.with_changes(comma=last.comma)
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.insert(index, new)
    return call.with_changes(args=args)


def bare_custom_decorator(decorator: cst.Decorator, quote: str = '"', device: str = "npu") -> cst.Decorator:
    """``@custom_fwd`` -> ``@custom_fwd(device_type="npu")``."""
    call = cst.Call(func=decorator.decorator, args=[_keyword("device_type", _npu(quote, device))])
    return decorator.with_changes(decorator=call)


def drop_cuda(node: cst.CSTNode) -> cst.CSTNode:
    """``T.cuda.amp.X`` -> ``T.amp.X`` (the ``cuda`` segment right after the root name)."""
    if isinstance(node, cst.Attribute):
        value = node.value
        if (
            node.attr.value == "amp"
            and isinstance(value, cst.Attribute)
            and value.attr.value == "cuda"
            and isinstance(value.value, cst.Name)
        ):
            return node.with_changes(value=value.value)
        return node.with_changes(value=drop_cuda(value))
    return node


def cuda_root_to_torch(node: cst.CSTNode) -> cst.CSTNode:
    """``cuda.amp.X`` (``from torch import cuda``) -> ``torch.amp.X``."""
    if isinstance(node, cst.Attribute):
        if isinstance(node.value, cst.Name) and node.value.value != "torch" and node.attr.value == "amp":
            return node.with_changes(value=cst.Name("torch"))
        return node.with_changes(value=cuda_root_to_torch(node.value))
    return node
