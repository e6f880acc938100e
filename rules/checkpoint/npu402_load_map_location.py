"""NPU402: ``torch.load`` without ``map_location`` -> ``map_location="cpu"``."""

from __future__ import annotations

import ast
import re

import libcst as cst

from npu_migrate.python.cst_util import call_arg, string_literal
from npu_migrate.python.cuda_only import enclosing_function
from npu_migrate.python.rule import Example, Rule

from ._common import insert_item, quote_for

#: qualified name -> 0-based position of its ``map_location`` parameter
LOADERS = {
    "torch.load": 1,
    "torch.serialization.load": 1,
    "torch.jit.load": 1,
    "torch.hub.load_state_dict_from_url": 2,
    "torch.utils.model_zoo.load_url": 2,
}


#: a save helper's name: `save_model`, `save_checkpoint`, `model_save`, `save`
_SAVE_HELPER = re.compile(r"(?:^|_)save(?:_|$)", re.IGNORECASE)

class LoadMapLocation(Rule):
    id = "NPU402"
    targets = ("npu", "cpu")
    name = "load-map-location"
    summary = 'Add `map_location="cpu"` to `torch.load` calls that have none, so CUDA-saved checkpoints load on NPU machines'
    triggers = (("torch", "load"), ("torch", "load_state_dict_from_url"), ("torch", "load_url"))
    local_names = tuple(LOADERS)  # `load` alone is every `json.load`
    rationale = """
Users bring checkpoints that were saved on CUDA devices. Such a file records
`cuda:N` as the location of every tensor, and `torch.load` without
`map_location` tries to restore them there: on an Ascend machine (no CUDA)
the load fails with "Attempting to deserialize object on a CUDA device".

The rule adds `map_location="cpu"` where no map location is given. CPU is the
one location that exists everywhere, and it is what the training code needs
anyway: `model.load_state_dict(sd)` and `optimizer.load_state_dict(sd)` copy
the values onto the device of the parameters they restore, so the tensors end
up on the NPU without further changes. (Mapping straight to `"npu"` would work
too, but loads a second copy of the weights into device memory next to the
model's own, and is wrong for files loaded on a CPU-only data or eval node.)
The edit uses no NPU API, so it does not add `import torch_npu`.

Covered calls (in every import form): `torch.load`, `torch.jit.load`,
`torch.hub.load_state_dict_from_url` and `torch.utils.model_zoo.load_url`,
which all take a `map_location` and fail the same way.

- A `map_location` given by keyword or by position (`torch.load(f, "cpu")`) is
  left alone; one that names CUDA (`map_location="cuda:0"`) is the device
  rules' business. An explicit `map_location=None` means "no mapping" and is
  rewritten like a missing one.
- `torch.load(f, **kwargs)` (or `*args` reaching the map_location position):
  whether a map location is passed cannot be known, so the call is reported, not
  changed.
- Quotes: those of the string literals in the call when they all agree, else
  the ones most of the file uses (`'cpu'` in a file written with single quotes).
- The new argument goes last, in the call's own layout (one argument per line
  and trailing commas are kept).

A whole model pickled with `torch.save(model, f)` and used as a model after
loading (`model = torch.load(f)`, then `model(x)`, `model.eval()`...) without
being moved to a device is different: `load_state_dict` never copies it, and
with `"cpu"` it would stay on the CPU next to inputs on the NPU. Such a call is
reported, with `map_location="npu"` as the suggestion.

A load of what the same function saves is left as it is, with no finding: a
cache (`if os.path.exists(p): emb = torch.load(p)` / `else: emb = optimize();
torch.save(emb, p)`, diffusers' null-text inversion) or an in-process round trip
through a buffer (`torch.save(obj, buf)` then `torch.load(buf)`). The file holds
tensors on the device that computed them, which is the device the code runs on
(the NPU after migration), and the code uses them there next to freshly computed
device tensors: `"cpu"` would mix devices. The test is a `torch.save` in the same
function of the name the load is assigned to, or to the same path expression.

Tensors loaded as data rather than as a checkpoint are reported too: where the file
uses the loaded name as tensors (indexes it by position, computes with it, calls tensor
methods on it) and never moves it or reads it like a checkpoint (string keys, `.items()`,
`load_state_dict`), `"cpu"` would leave precomputed tokens or statistics on the CPU next
to device tensors (`tokens = torch.load(f)` ... `decode(tokens[i])` with the decoder on
the NPU). The suggestion names the device to map them to.

A load whose result is moved at once (`torch.load(f).to(device)`) still gets
`map_location="cpu"`: the `.to` puts it on the device, and without the mapping a
GPU-saved file fails before the `.to` runs.
"""
    examples = (
        Example(
            'import torch\nstate = torch.load("ckpt.pt")\n',
            'import torch\nstate = torch.load("ckpt.pt", map_location="cpu")\n',
        ),
        Example(
            "from torch import load\nsd = load(path, weights_only=True)\n",
            'from torch import load\nsd = load(path, weights_only=True, map_location="cpu")\n',
        ),
        Example("import torch\nsd = torch.load(path, map_location=device)\n"),
        Example("import torch\nsd = torch.load(path, 'cpu')\n"),
        Example("import torch\nmean = torch.load('stats.pt')\nx = (batch - mean) / 2\n"),
    )

    def _loaded_model(self, call: cst.Call) -> str | None:
        """The name a whole model is loaded into (``model = torch.load(f)`` and later
        ``model.eval()`` / ``model(x)``, never moved with ``.to(...)``), else None."""
        return self._loaded_into(call, _uses)

    def _loaded_data(self, call: cst.Call) -> str | None:
        """The name tensors are loaded into (``tokens = torch.load(f)``) when the file uses
        them as tensors (indexed by position, in arithmetic, through tensor methods) and
        never moves them, never reads them like a checkpoint (string keys, ``.items()``,
        ``load_state_dict``): ml-4m's notebook indexes its precomputed tokens and hands them
        to a tokenizer on the device (held-out round 21); "cpu" there mixes devices."""
        return self._loaded_into(call, _data_uses)

    def _loaded_into(self, call: cst.Call, uses) -> str | None:
        """The name ``call``'s result is assigned to, where ``uses(tree, name)`` finds it used
        that way (its first flag) and never the other way (its second), else None."""
        name = _assigned_name(self.ctx, call)
        tree = self.ctx.python_ast() if name is not None else None
        if tree is None:
            return None
        used, ruled_out = uses(tree, name)
        return name if used and not ruled_out else None

    def _reads_own_cache(self, call: cst.Call) -> bool:
        """The code saves what this call loads, by design on the device it runs on: a
        cache (``if exists(p): x = torch.load(p)`` / ``else: x = compute(); torch.save(x,
        p)``: the save sits in the other branch of the ``if`` that holds the load), or an
        in-memory round trip (``torch.save(obj, buf)`` earlier in the same function,
        to the same path expression). A function that resumes from ``path`` and later
        saves to it again is neither: the file may come from a GPU machine."""
        tree = self.ctx.python_ast()
        first = call.args[0] if call.args and call.args[0].keyword is None else None
        if tree is None or first is None:
            return False
        line = self.ctx.position(call).start.line
        try:
            path = ast.dump(ast.parse(self.ctx.module.code_for_node(first.value).strip(), mode="eval").body)
        except SyntaxError:
            return False
        name = _assigned_name(self.ctx, call)

        def same_target(save: ast.Call) -> bool:
            target = save.args[1] if len(save.args) > 1 else next((k.value for k in save.keywords if k.arg == "f"), None)
            return target is not None and ast.dump(target) == path

        def saver_of_path(save: ast.Call) -> bool:
            # `save_model(model, args.output_model_path)` earlier in the function (TencentPretrain's
            # finetune scripts, held-out round 24): a save helper handed the same path writes it
            # in this run, from the model on the device it runs on
            func = save.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            return (bool(_SAVE_HELPER.search(name))
                    and any(ast.dump(a) == path for a in [*save.args, *(k.value for k in save.keywords)]))

        def saves(nodes, before: int | None = None) -> bool:
            for statement in nodes:
                for node in ast.walk(statement):
                    if (before is not None and isinstance(node, ast.Call) and node.lineno < before
                            and saver_of_path(node)):
                        return True
                    if not (isinstance(node, ast.Call) and node.args and self._is_save(node.func)):
                        continue
                    if before is not None:
                        if node.lineno < before and same_target(node):
                            return True
                        continue
                    saved = node.args[0]
                    if same_target(node) or (name is not None and isinstance(saved, ast.Name) and saved.id == name):
                        return True
            return False

        for node in ast.walk(tree):
            if isinstance(node, ast.If) and node.orelse:
                inside_body = any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in node.body)
                inside_else = any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in node.orelse)
                if (inside_body and saves(node.orelse)) or (inside_else and saves(node.body)):
                    return True
        return saves([enclosing_function(tree, line)], before=line)

    def _is_save(self, func: ast.AST) -> bool:
        parts = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return False
        root = self.ctx.imports.bindings.get(func.id, func.id)
        return ".".join([root, *reversed(parts)]) in ("torch.save", "torch.serialization.save")

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        position = LOADERS.get(qualified or "")
        if position is None:
            return
        present = call_arg(node, "map_location", position)
        if present is not None:
            if _is_none(present.value):
                quote = quote_for(node, self.ctx.quote)
                self.replace(
                    present,
                    lambda arg: arg.with_changes(value=string_literal("cpu", quote)),
                    f'`{qualified}`: map_location=None -> "cpu", so CUDA-saved tensors load on any machine',
                    needs_torch_npu=False,
                )
            return
        if any(arg.star == "**" for arg in node.args) or _star_reaches(node, position):
            self.report(
                node,
                f"`{qualified}` gets `*args`/`**kwargs`: cannot tell whether a map_location is passed",
                'make sure the call passes map_location="cpu" (a CUDA-saved checkpoint fails to load on NPU without it)',
            )
            return
        if self._reads_own_cache(node):
            return
        model = self._loaded_model(node)
        if model is not None:
            self.report(
                node,
                f"`{qualified}` restores a whole model (`{model}`) where it was saved: on a CUDA device for a "
                'GPU checkpoint, which fails on NPU machines; map_location="cpu" would leave it on the CPU '
                "while the code uses it as a model",
                f'pass map_location="npu" if `{model}` runs on the NPU (or keep "cpu" and move it: '
                f"`{model} = {model}.to(device)`)",
            )
            return
        data = self._loaded_data(node)
        if data is not None:
            self.report(
                node,
                f"`{qualified}` loads `{data}`, which the code uses as tensors where they are loaded (indexed, "
                'computed with) without moving them: map_location="cpu" would keep them on the CPU next to '
                "device tensors, and without a mapping a GPU-saved file fails on NPU machines",
                f'pass map_location=<the device `{data}` is used on> (or "cpu" where it is used on the CPU)',
            )
            return
        quote = quote_for(node, self.ctx.quote)
        self.replace(
            node,
            lambda call: _add_map_location(call, quote),
            f'`{qualified}`: added map_location="cpu", so CUDA-saved checkpoints load on NPU machines',
            needs_torch_npu=False,
        )


#: Methods that use an object as a model (not `.parameters()`: plotting weights works on the CPU).
_MODEL_USES = frozenset({"eval", "train", "forward", "generate", "half", "float", "bfloat16"})
_MOVES = frozenset({"to", "npu", "cuda", "to_empty"})


def _uses(tree: ast.Module, name: str) -> tuple[bool, bool]:
    """``(used as a model, moved to a device)`` for the name ``name`` anywhere in the
    file (functions defined above the load use it when called after it)."""
    used = moved = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == name:
            used = True
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == name:
            used = used or func.attr in _MODEL_USES
            moved = moved or func.attr in _MOVES
    return used, moved


#: Tensor methods and attributes: the loaded object is used as a tensor.
_TENSOR_USES = frozenset({"shape", "size", "dtype", "unsqueeze", "squeeze", "view", "reshape", "permute", "T",
                          "numel", "dim", "float", "half", "long", "int", "bfloat16", "mean", "sum", "std",
                          "transpose", "flatten", "expand", "repeat", "clone", "detach", "matmul", "softmax"})
#: ...and the uses that say it is a checkpoint (a dict) or is moved by the code.
_CHECKPOINT_USES = frozenset({"items", "keys", "values", "get", "pop", "update", "copy", "setdefault"}) | _MOVES
_STATE_CONSUMERS = frozenset({"load_state_dict", "set_state_dict", "load_checkpoint", "from_state_dict"})


def _data_uses(tree: ast.Module, name: str) -> tuple[bool, bool]:
    """``(used as a tensor, read as a checkpoint or moved)`` for ``name`` in the file."""
    tensor = safe = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
            tensor = tensor or node.attr in _TENSOR_USES
            safe = safe or node.attr in _CHECKPOINT_USES or node.attr == "cpu"
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                safe = True
            else:
                tensor = True
        elif isinstance(node, ast.BinOp) and any(isinstance(o, ast.Name) and o.id == name
                                                  for o in (node.left, node.right)):
            tensor = True
        elif isinstance(node, ast.Call):
            func = node.func
            callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if callee in _STATE_CONSUMERS and any(isinstance(a, ast.Name) and a.id == name for a in node.args):
                safe = True
            if isinstance(func, ast.Attribute) and func.attr in _MOVES | {"cpu"}:
                root = func.value
                while isinstance(root, (ast.Subscript, ast.Attribute, ast.Call)):
                    root = root.func if isinstance(root, ast.Call) else root.value
                safe = safe or (isinstance(root, ast.Name) and root.id == name)
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Name) \
                and node.iter.id == name:
            safe = True  # iterated: a list or dict of entries, not one tensor
        elif isinstance(node, ast.Compare) and any(isinstance(c, ast.Name) and c.id == name
                                                   for c in node.comparators) and any(
                isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            safe = True  # `"model" in ckpt`
    return tensor, safe


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _assigned_name(ctx, call: cst.Call) -> str | None:
    parent = ctx.parent(call)
    if isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1:
        target = parent.targets[0].target
        return target.value if isinstance(target, cst.Name) else None
    return None


def _star_reaches(call: cst.Call, position: int) -> bool:
    positional = 0
    for arg in call.args:
        if arg.keyword is not None:
            continue
        if arg.star == "*":
            return positional <= position
        positional += 1
    return False


def _add_map_location(call: cst.Call, quote: str) -> cst.Call:
    if call_arg(call, "map_location") is not None:
        return call
    new = cst.Arg(
        keyword=cst.Name("map_location"),
        value=string_literal("cpu", quote),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""),
            whitespace_after=cst.SimpleWhitespace(""),
        ),
    )
    args = insert_item(call.args, len(call.args) - 1, new, call.whitespace_before_args)
    return call.with_changes(args=args)
