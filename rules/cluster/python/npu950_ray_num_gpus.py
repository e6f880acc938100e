"""NPU950: Ray's ``num_gpus=N`` requests become ``resources={"NPU": N}``."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import call_arg, string_literal, string_value
from npu_migrate.python.rule import Example, Rule
from npu_migrate.rules.cluster import _ray
from npu_migrate.rules.cluster.python._common import asserts_gpu_resource, in_gpu_branch
from npu_migrate.rules.llm.python._common import without_keyword

#: calls whose ``num_gpus=`` is Ray's own (qualified names)
RAY_CALLS = frozenset({"ray.remote", "ray.init"})
_WHY = 'Ray schedules Ascend devices under the resource name "NPU" (ray 2.60.0: ray/_private/accelerators/npu.py)'


def number(expr: cst.BaseExpression) -> float | None:
    """The value of an int or float literal (``1``, ``0.5``), else None."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        try:
            return float(expr.evaluated_value)
        except (TypeError, ValueError):
            return None
    return None


def is_ray_remote(rule: Rule, expr: cst.BaseExpression) -> bool:
    """``ray.remote`` or ``ray.remote(...)``: a decorator or call that makes a Ray task/actor."""
    if isinstance(expr, cst.Call):
        expr = expr.func
    return rule.qualified_name(expr) == "ray.remote"


def _self_assignments(owner: cst.ClassDef, attr: str) -> list[cst.BaseExpression] | None:
    """The values ``owner``'s methods assign to ``self.<attr>`` (plain ``=`` with one
    target); None when one writes it any other way (``+=``, tuple targets, ``setattr``
    is not seen: a class that uses it is rare and is then still a finding elsewhere)."""
    values: list[cst.BaseExpression] = []
    unsure = False

    def is_it(target: cst.BaseExpression) -> bool:
        return (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                and target.value.value == "self" and target.attr.value == attr)

    class Collect(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal unsure
            for target in node.targets:
                if is_it(target.target):
                    if len(node.targets) != 1:
                        unsure = True
                    values.append(node.value)
                elif isinstance(target.target, (cst.Tuple, cst.List)) and any(
                        is_it(e.value) for e in target.target.elements):
                    unsure = True

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            nonlocal unsure
            if is_it(node.target):
                if node.value is None:
                    return
                values.append(node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            nonlocal unsure
            if is_it(node.target):
                unsure = True

        def visit_For(self, node: cst.For) -> None:
            nonlocal unsure
            if is_it(node.target):
                unsure = True

    owner.body.visit(Collect())
    return None if unsure else values


def imports_ray(rule: Rule) -> bool:
    return any(v == "ray" or v.startswith("ray.") for v in rule.ctx.imports.bindings.values())


class RayNumGpus(Rule):
    id = "NPU950"
    name = "ray-num-gpus"
    impact = "blocking"
    summary = 'Rewrite Ray\'s `num_gpus=N` (`@ray.remote`, `.options`, `ray.init`) to `resources={"NPU": N}`'
    triggers = (("ray", "num_gpus"),)
    whole_file = True
    rationale = """
Ray names Ascend devices `"NPU"` (ray 2.60.0, `ray/_private/accelerators/npu.py`:
`NPUAcceleratorManager.get_resource_name()`; ray-project/ray PR 41256) and counts them
from `ASCEND_RT_VISIBLE_DEVICES`. `num_gpus` is the resource `"GPU"`
(`ray/_common/ray_option_utils.py`), which an Ascend node does not have: a task or
actor that asks for it stays pending forever. The request for NPUs is a custom
resource, `resources={"NPU": N}` (fractions work as for GPUs); `ray.init(resources=
{"NPU": N})` sets a local node's count (`ray/_private/resource_and_label_spec.py`
reads `resources.get("NPU")`).

Rewritten where the call is provably Ray's: `ray.remote(...)` and `ray.init(...)`
through the file's imports, and `X.options(num_gpus=N)` where `X` is bound once in
the file by `@ray.remote` (a decorated class or function) or `X = ray.remote(...)`,
or is `ray.remote(...)(f)` itself. An existing `resources={...}` literal gets the
`"NPU"` entry. Only values that are provably numbers are moved: literals, conditionals
of them, a name bound once in its scope to one (or a parameter annotated `int`/`float`
whose default is not `None`), and `self.x` that its class assigns exactly once, to one
(open-instruct's `self.num_gpus_per_actor = 0.48 if single_gpu_mode else 1`). Any other
computed value may be `None` (Ray's "not set"), which `resources` does not accept, so it
is reported with the exact replacement; so are `.options` calls on objects the file cannot
prove are Ray's, and a `resources=` that is not a dict literal. Where such an `.options`
request stays, the file's `ray.remote(num_gpus=...)` requests are reported too, not
rewritten: Ray merges decorator and `.options` requests, so an actor would ask for the
NPU and for GPUs at once; the file is never half NPU, half GPU. A `"num_gpus"` entry of
a dict spread into `.options(**opts)` (reported) holds them the same way. `num_gpus=0` asks for nothing and is
left alone, and so is a request in the GPU branch of code that picks Ray's resource
name itself (`if platform.ray_device_key == "GPU": ...(num_gpus=0.01) else:
...(resources={platform.ray_device_key: 0.01})`, ROLL's vLLM executors; vllm-ascend's
platform names `"NPU"`): the other branch already asks for the NPU. A `"num_gpus"`
entry of a dict literal that is spread into a Ray call (`opts = {"num_cpus": 1,
"num_gpus": 0.01}`, then `.options(**opts)`; every dict literal assigned to `opts` in
its scope) is reported with its replacement. An `assert platform.ray_device_key == "GPU"`
(ROLL's vLLM executors, before the request) is reported: vllm-ascend's platform names
`"NPU"`, so the assertion stops the job on Ascend before and after the rewrite; accept
`"NPU"` too (`in ("GPU", "NPU")`). It is left as written: whether the code after it
holds on the NPU is the project's call.
"""
    examples = (
        Example(
            "import ray\n\n@ray.remote(num_gpus=1)\nclass Worker:\n    pass\n",
            'import ray\n\n@ray.remote(resources={"NPU": 1})\nclass Worker:\n    pass\n',
        ),
        Example(
            'import ray\n\n@ray.remote\ndef f():\n    pass\n\nf.options(num_gpus=0.5, resources={"disk": 1}).remote()\n',
            'import ray\n\n@ray.remote\ndef f():\n    pass\n\nf.options(resources={"disk": 1, "NPU": 0.5}).remote()\n',
        ),
        Example("import ray\n\nactor_cls.options(num_gpus=n).remote()  # reported\n"),
        Example("def options(num_gpus=1):\n    return dict(num_gpus=num_gpus)\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._options: list[tuple[cst.Call, cst.Arg]] = []
        self._spread: list[tuple[cst.Call, cst.Name]] = []
        self._reported: set[int] = set()
        self._remotes: list[tuple[cst.Call, cst.Arg]] = []
        #: `options["num_gpus"] = n`: (the statement, the dict's name, the value)
        self._keyed: list[tuple[cst.Assign, str, cst.BaseExpression]] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            subscript = target.target
            if (isinstance(subscript, cst.Subscript) and isinstance(subscript.value, cst.Name)
                    and len(subscript.slice) == 1 and isinstance(subscript.slice[0].slice, cst.Index)
                    and string_value(subscript.slice[0].slice.value) == "num_gpus"):
                self._keyed.append((node, subscript.value.value, node.value))

    def visit_Assert(self, node: cst.Assert) -> None:
        if asserts_gpu_resource(node.test) and imports_ray(self):
            code = cst.Module(body=[]).code_for_node(node.test)
            self.report(node, f"`assert {code}` fails on Ascend, where the platform's Ray resource name is "
                        f"{self.ctx.quote}NPU{self.ctx.quote} (vllm-ascend)",
                        f"accept {self.ctx.quote}NPU{self.ctx.quote} too, e.g. `in ({self.ctx.quote}GPU{self.ctx.quote}, "
                        f"{self.ctx.quote}NPU{self.ctx.quote})`, where the Ray requests after it ask for the NPU; {_WHY}")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        ray_call = self.qualified_name(func) in RAY_CALLS or (
            isinstance(func, cst.Attribute) and func.attr.value == "options" and imports_ray(self))
        if ray_call:  # `.options(**worker_options)`: the dict's "num_gpus" entry, once the file is seen
            self._spread.extend((node, a.value) for a in node.args if a.star == "**" and isinstance(a.value, cst.Name))
        argument = call_arg(node, "num_gpus")
        if argument is None:
            return
        if self.qualified_name(func) == "ray.remote":
            self._remotes.append((node, argument))  # held if an `.options` of the file stays a GPU request
        elif self.qualified_name(func) in RAY_CALLS:
            self._request(node, argument, proven=True)
        elif isinstance(func, cst.Attribute) and func.attr.value == "options" and imports_ray(self):
            self._options.append((node, argument))  # decided once the whole file has been seen

    def leave_file(self) -> None:
        left: list[cst.Call] = []  # `.options(num_gpus=...)` the rule can only report
        for node, argument in self._options:
            proven = self._remote_object(node.func.value)
            # None: a class or function of this file that Ray does not wrap
            if proven is not None and not self._request(node, argument, proven=proven):
                left.append(node)
        for node, name in self._spread:
            if isinstance(node.func, cst.Attribute) and self._remote_object(node.func.value) is None:
                continue
            if self._spread_request(name) and self.qualified_name(node.func) != "ray.init":
                left.append(node)  # `.options(**opts)` whose `opts` asks for GPUs: a finding
        for node, argument in self._remotes:
            self._request(node, argument, proven=True, held=left)

    def _spread_request(self, name: cst.Name) -> bool:
        """A ``"num_gpus"`` entry of the dict literals assigned to a name in its scope that
        is spread into a Ray call (ROLL's ``sglang_ray_option = {..., 'num_gpus': 0.01}``,
        then ``.options(**sglang_ray_option)``; SkyRL assigns ``actor_options`` twice):
        reported with its replacement, once per literal. True if there is one."""
        found = False
        for assignment in self.ctx.assignments(name, name.value) or ():
            bound = getattr(assignment, "node", None)  # builtins have no node
            target = self.ctx.parent(bound) if isinstance(bound, cst.Name) else None
            statement = self.ctx.parent(target) if isinstance(target, cst.AssignTarget) else None
            if isinstance(statement, cst.Assign) and isinstance(statement.value, cst.Dict):
                found = self._spread_dict(name, statement.value) or found
        # `options["num_gpus"] = num_gpus` in the same function (verl's RayClassWithInitArgs,
        # held-out round 20)
        scope = self.ctx.scope(name)
        for statement, holder, value in self._keyed:
            if holder != name.value or self.ctx.scope(statement.targets[0].target.value) is not scope:
                continue
            if number(value) == 0 or in_gpu_branch(self.ctx, statement):
                continue
            found = True
            if id(statement) in self._reported:
                continue
            self._reported.add(id(statement))
            code = cst.Module(body=[]).code_for_node(value)
            quote = self.ctx.quote
            self.report(statement, f"`{holder}[{quote}num_gpus{quote}] = {code}`, spread into a Ray call, asks Ray "
                        "for GPUs", f"on Ascend set `{holder}[{quote}resources{quote}] = {{{quote}NPU{quote}: {code}}}` "
                        f"instead (merged into an existing {quote}resources{quote} entry); {_WHY}")
        return found

    def _spread_dict(self, name: cst.Name, value: cst.Dict) -> bool:
        """Report the dict's ``"num_gpus"`` request; True if it has one (reported now or before)."""
        found = False
        for element in value.elements:
            if not isinstance(element, cst.DictElement) or string_value(element.key) != "num_gpus":
                continue
            if number(element.value) == 0 or in_gpu_branch(self.ctx, element):
                continue
            found = True
            if id(element) in self._reported:
                continue
            self._reported.add(id(element))
            code = cst.Module(body=[]).code_for_node(element.value)
            quote = self.ctx.quote
            self.report(element, f"`{quote}num_gpus{quote}: {code}` in `{name.value}`, spread into a Ray call, asks Ray "
                        "for GPUs", f"on Ascend write `{quote}resources{quote}: {{{quote}NPU{quote}: {code}}}` instead "
                        f"(merged into an existing {quote}resources{quote} entry); {_WHY}")
        return found

    def _remote_object(self, receiver: cst.BaseExpression) -> bool | None:
        """``receiver`` is a Ray remote function or actor class, as the file shows (True),
        may be one (False), or is an object of a class or function of this file that
        Ray does not wrap (None)."""
        if isinstance(receiver, cst.Call) and is_ray_remote(self, receiver.func):
            return True  # ray.remote(f).options(...), ray.remote(num_gpus=1)(f).options(...)
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name):
            found = self.ctx.assignments(receiver.func, receiver.func.value)
            local = found and all(isinstance(getattr(a, "node", None), (cst.ClassDef, cst.FunctionDef)) for a in found)
            return None if local else False
        if not isinstance(receiver, cst.Name):
            return False
        found = self.ctx.assignments(receiver, receiver.value)
        if not found or len(found) != 1:
            return False
        (assignment,) = found
        bound = getattr(assignment, "node", None)
        if isinstance(bound, (cst.ClassDef, cst.FunctionDef)):
            return any(is_ray_remote(self, d.decorator) for d in bound.decorators)
        if isinstance(bound, cst.Name):
            parent = self.ctx.parent(bound)
            if isinstance(parent, cst.AssignTarget):
                statement = self.ctx.parent(parent)
                value = statement.value if isinstance(statement, cst.Assign) else None
                return isinstance(value, cst.Call) and is_ray_remote(self, value.func)
        return False

    def _proven_number(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """``expr`` is provably a number (never Ray's ``None``): a number literal, a
        conditional whose branches both are (``0.48 if single_gpu_mode else 1``), a name
        bound once in its scope to one (``num_gpus = 0.5 if hybrid else tp``), a parameter
        annotated ``int`` or ``float`` whose default is not ``None``, or ``self.attr`` that
        its class assigns exactly once, to one (open-instruct's ``self.num_gpus_per_actor``)."""
        if depth > 4:
            return False
        if number(expr) is not None:
            return True
        if isinstance(expr, cst.IfExp):
            return self._proven_number(expr.body, depth + 1) and self._proven_number(expr.orelse, depth + 1)
        if isinstance(expr, cst.Name):
            found = self.ctx.assignments(expr, expr.value)
            if not found or len(found) != 1:
                return False
            (assignment,) = found
            bound = getattr(assignment, "node", None)
            if isinstance(bound, cst.Param):
                annotation = bound.annotation.annotation if bound.annotation is not None else None
                default_none = isinstance(bound.default, cst.Name) and bound.default.value == "None"
                return (isinstance(annotation, cst.Name) and annotation.value in ("int", "float")
                        and not default_none and bound.star == "")
            target = self.ctx.parent(bound) if isinstance(bound, cst.Name) else None
            statement = self.ctx.parent(target) if isinstance(target, cst.AssignTarget) else None
            if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
                return self._proven_number(statement.value, depth + 1)
            if isinstance(statement, cst.AnnAssign) and statement.value is not None:
                return self._proven_number(statement.value, depth + 1)
            return False
        if (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)
                and expr.value.value == "self"):
            owner = next((a for a in self.ctx.ancestors(expr) if isinstance(a, cst.ClassDef)), None)
            if owner is None:
                return False
            values = _self_assignments(owner, expr.attr.value)
            return values is not None and len(values) == 1 and self._proven_number(values[0], depth + 1)
        return False

    def _request(self, call: cst.Call, argument: cst.Arg, *, proven: bool, held: list[cst.Call] = ()) -> bool:
        """Rewrite or report one request; True unless it stays a GPU request (reported).
        ``held``: `.options(num_gpus=...)` calls of the file that stay GPU requests; a
        ``ray.remote(num_gpus=...)`` is then reported too, not rewritten, so that the file
        never asks for the NPU in a decorator and for GPUs in the `.options` that places
        the same actors (Ray merges the two: the actor would need both)."""
        value = argument.value
        amount = number(value)
        if amount is None and self._proven_number(value):
            amount = -1.0  # a computed value that is provably a number (not 0 as far as the file shows)
        if amount == 0 or in_gpu_branch(self.ctx, call):
            return True
        quote = self.ctx.quote
        code = cst.Module(body=[]).code_for_node(value)
        resources = call_arg(call, "resources")
        if resources is not None:
            shown = f'add {quote}NPU{quote}: {code} to its `resources` dict and drop `num_gpus`'
        else:
            shown = f"`resources={{{quote}NPU{quote}: {code}}}`"
        if amount is None or not proven or (resources is not None and not self._mergeable(resources.value)):
            why = (
                "a computed value, which may be Ray's `None` (not set) that `resources` rejects" if amount is None
                else "the object is not provably a Ray remote function or actor" if not proven
                else "its `resources` is not a dict literal"
            )
            self.report(argument, f"`num_gpus={code}` asks Ray for GPUs ({why})",
                        f"on Ascend ask for {shown} instead; {_WHY}")
            return False
        if held:
            # (a count, not line numbers: a finding's message stays the same when other edits
            # of the file move lines, so a second run reports what the first did)
            self.report(argument, f"`num_gpus={code}` asks Ray for GPUs; not rewritten because {len(held)} "
                        "`.options(num_gpus=...)` call(s) of this file (each reported), which the tool cannot "
                        "rewrite, may place these actors with GPUs (Ray merges the two requests)",
                        f"on Ascend ask for {shown} here and in those `.options` together; {_WHY}")
            return False
        key = string_literal(_ray.RESOURCE, quote)

        def rewrite(updated: cst.Call) -> cst.Call:
            old = call_arg(updated, "num_gpus")
            if old is None:
                return updated
            entry = cst.DictElement(key, old.value)
            if call_arg(updated, "resources") is None:
                new = old.with_changes(keyword=cst.Name("resources"), value=cst.Dict([entry]))
                return updated.with_changes(args=[new if a is old else a for a in updated.args])
            trimmed = without_keyword(updated, "num_gpus")
            merged = []
            for arg in trimmed.args:
                if arg.keyword is not None and arg.keyword.value == "resources" and isinstance(arg.value, cst.Dict):
                    elements = list(arg.value.elements)
                    if elements and isinstance(elements[-1].comma, cst.MaybeSentinel):
                        elements[-1] = elements[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                    arg = arg.with_changes(value=arg.value.with_changes(elements=[*elements, entry]))
                merged.append(arg)
            return trimmed.with_changes(args=merged)

        self.replace(call, rewrite, f"`num_gpus={code}` -> {shown}", needs_torch_npu=False, anchor=argument,
                     reason=f"`num_gpus` of a Ray call; {_WHY}")
        return True

    def _mergeable(self, value: cst.BaseExpression) -> bool:
        return isinstance(value, cst.Dict) and all(
            isinstance(e, cst.DictElement) and string_value(e.key) != _ray.RESOURCE for e in value.elements
        )
