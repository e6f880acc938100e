"""NPU965: launchers that start vLLM (``vllm serve``, ``python -m vllm.entrypoints...``,
``trl vllm-serve``) or turn it on (``--use_vllm``, ``--vllm_*`` / ``--vllm.*`` options)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.rules.cluster import _vllm
from npu_migrate.rules.shell._arguments import array_words, option_string_words
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

_FALSE = {"false", "False", "0", "no", "off"}
_PYTHON = {"python", "python3"}
#: last keys of Hydra overrides that pick the generation engine by name
#: (SkyRL's ``generator.inference_engine.backend=vllm``); ``name`` only after ``rollout``
#: (verl's ``actor_rollout_ref.rollout.name=vllm``)
_ENGINE_KEYS = {"backend", "engine", "engine_type", "inference_backend", "rollout_backend"}
_VARIABLE = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")


def _ray_job_entrypoint(words: list[syntax.Arg]) -> list[syntax.Arg] | None:
    """The entrypoint's words of ``ray job submit [options] -- python -m trainer ...`` (after ``--``)."""
    entry = syntax.ray_job_entrypoint(words)
    starts = _PYTHON | syntax.LAUNCHERS | syntax.WRAPPERS | {"trl", "openrlhf"}
    return entry if entry and syntax.program(entry[0]) in starts else None


def _vllm_module(words: list[syntax.Arg]) -> str | None:
    """``vllm.entrypoints.openai.api_server`` for ``python -m vllm.entrypoints.openai.api_server``."""
    for index, word in enumerate(words[:-1]):
        if word.text == "-m":
            module = words[index + 1].text
            return module if module == "vllm" or module.startswith("vllm.") else None
    return None


class ShellVllm(ShellRule):
    id = "NPU965"
    name = "shell-vllm"
    impact = "blocking"
    fixable = False
    summary = ("Report launchers that start or turn on vLLM (`vllm serve`, `python -m vllm.entrypoints...`, "
               "`trl vllm-serve`, `--use_vllm`, `--vllm_*`): on Ascend it needs the vllm-ascend plugin")
    triggers = (b"vllm",)
    rationale = f"""
vLLM runs on Ascend through its platform plugin, vllm-ascend (the same vLLM API and
command line; vLLM discovers the plugin at start-up). A launcher that starts vLLM
(`vllm serve MODEL`, `python -m vllm.entrypoints.openai.api_server`, TRL's `trl
vllm-serve`) or asks a trainer to (`--use_vllm` / `--use_vllm true` of TRL's GRPO and
online DPO, `--vllm_mode`, `--vllm_gpu_memory_utilization`, OpenRLHF's
`--vllm_num_engines`, `--vllm.*` groups, verl's Hydra override
`actor_rollout_ref.rollout.name=vllm`, SkyRL's `generator.inference_engine.backend=vllm`,
any dotted override whose last key is `backend`, `engine`, `engine_type`,
`inference_backend` or `rollout_backend` set to `vllm`, also through a variable the
script assigns `vllm`: `...backend=$INFERENCE_BACKEND` after `INFERENCE_BACKEND="vllm"` or
`: "${{INFERENCE_BACKEND:=vllm}}"`) runs on the CUDA build otherwise. Besides launch
lines (`uv run -m` included), a command whose interpreter is held in a variable and
that runs a module (`"${{DRIVER[@]}}" -m trainer ...`) or a script held in a variable the
file assigns a `.py` path (`"${{DRIVER[@]}}" "${{ENTRY}}" ...` after
`ENTRY="${{DIR}}/entry.py"`, SkyRL's FSDP launcher) is read for these options. The
options are read on launch lines (also behind wrappers, and after the `--` of `ray
job submit ... -- python -m trainer`), in argument arrays (`ENGINE_ARGS=(--vllm.num_engines 2 ...)`)
and in option strings kept in variables (`VLLM_ARGS="--vllm_num_engines 4"`). One
finding per command, array or string, at the launcher or at its first vLLM option. Route:
{_vllm.ROUTE}. Not rewritten: the command itself stays the same.
"""
    examples = (
        Example("vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 8  # reported\n"),
        Example("python train.py --use_vllm false --lr 1e-5\n"),
    )

    def visit_command(self, node: Node) -> None:
        words = syntax.command_args(node)
        if not words:
            return
        first = syntax.program(words[0])
        programs = [syntax.program(w) for w in words]
        for index, name in enumerate(programs[:-1]):
            if name == "vllm" and words[index + 1].text == "serve" and (index == 0 or first in syntax.WRAPPERS):
                self._report(node, words[index].node, "`vllm serve` starts vLLM")
                return
            if name == "trl" and words[index + 1].text == "vllm-serve" and (index == 0 or first in syntax.WRAPPERS):
                self._report(node, words[index].node, "`trl vllm-serve` starts vLLM")
                return
        if first in _PYTHON or first in syntax.WRAPPERS:
            module = _vllm_module(words)
            if module is not None:
                self._report(node, words[0].node, f"`python -m {module}` starts vLLM")
                return
        launch = syntax.launch_args(node)
        entrypoint = _ray_job_entrypoint(words) if launch is None else None
        # `"${DRIVER[@]}" -m trainer ...` with `DRIVER=(uv run --extra gpu)`: an interpreter in a variable
        driven = launch is None and words[0].text.lstrip("\"").startswith("$") and len(words) > 2 \
            and words[1].text == "-m"
        script = _VARIABLE.fullmatch(words[1].text.strip("\"")) if launch is None and len(words) > 2 else None
        if script is not None and words[0].text.lstrip("\"").startswith("$"):
            # `"${DRIVER[@]}" "${FSDP_BIRD_ENTRY}" ...`: decided once the file's `.py` assignments are known
            self._scripted.append((node, words[2:], script.group(1)))
            return
        if launch is None and entrypoint is None and not driven and first not in ("trl", "openrlhf"):
            return
        options = launch[1] if launch is not None else entrypoint if entrypoint is not None else words[1:]
        self._options(node, options)

    def visit_array(self, node: Node) -> None:
        words = array_words(node)  # ENGINE_ARGS=(--vllm.num_engines 2 ...), expanded into a launch
        if words:
            self._options(node.parent, words)

    def __init__(self, file) -> None:
        super().__init__(file)
        self._values: dict[str, set[str]] = {}  # INFERENCE_BACKEND="vllm"
        self._pending: list[tuple[Node, Node, str, str]] = []  # overrides whose value is a variable
        self._reported: set[int] = set()  # commands (start bytes) with a finding
        self._scripts: set[str] = set()  # variables assigned a `*.py` path (FSDP_BIRD_ENTRY="${DIR}/entry.py")
        self._scripted: list[tuple[Node, list[syntax.Arg], str]] = []  # `"$DRIVER" "$SCRIPT" options...`

    def visit_expansion(self, node: Node) -> None:
        """``: "${INFERENCE_BACKEND:=vllm}"`` (SkyRL): the default is assigned to the variable."""
        children = node.children
        names = [c for c in children if c.type == "variable_name"]
        operators = [c for c in children if c.type in (":=", "=")]  # the forms that assign
        if len(names) == 1 and operators:
            default = [c for c in children if c.start_byte >= operators[0].end_byte and c.type not in ("}",)]
            text = b"".join(c.text for c in default).decode("utf-8", "replace").strip("\"'")
            if text and all(c.type in ("word", "string", "raw_string", "string_content") for c in default):
                self._values.setdefault(names[0].text.decode("utf-8", "replace"), set()).add(text)

    def visit_variable_assignment(self, node: Node) -> None:
        value = node.child_by_field_name("value")
        name = node.child_by_field_name("name")
        if name is not None and value is not None:
            static = syntax.static_value(value)
            if static is not None:
                self._values.setdefault(name.text.decode("utf-8", "replace"), set()).add(static)
            if value.text.decode("utf-8", "replace").strip("\"'").endswith(".py"):
                self._scripts.add(name.text.decode("utf-8", "replace"))
        words = option_string_words(value) if value is not None else None  # VLLM_ARGS="--vllm_num_engines 4"
        if words:
            self._options(node, words)

    def leave_file(self) -> None:
        for command, options, variable in self._scripted:
            if variable in self._scripts:  # a Python script run by an interpreter held in a variable
                self._options(command, options)
        for command, at, key, variable in self._pending:
            if command.start_byte not in self._reported and "vllm" in self._values.get(variable, ()):
                self._report(command, at, f"`{key}=${variable}` (`{variable}=vllm` in this script) makes the trainer "
                             "generate with vLLM")

    def _options(self, node: Node, options: list[syntax.Arg]) -> None:
        for index, word in enumerate(options):
            text = word.text
            name, equals, value = text.partition("=")
            if name in ("--use_vllm", "--use-vllm"):
                if not equals and index + 1 < len(options) and not options[index + 1].text.startswith("-"):
                    value = options[index + 1].text
                if value in _FALSE:
                    continue
                self._report(node, word.node, f"`{name}` makes the trainer generate with vLLM")
                return
            if name.startswith(("--vllm_", "--vllm-", "--vllm.")):
                self._report(node, word.node, f"`{name}` configures vLLM")
                return
            key = name.lstrip("+").split(".")
            if equals and len(key) > 1 and (key[-1] in _ENGINE_KEYS or key[-2:] == ["rollout", "name"]):
                chosen = value.strip("\"'")
                if chosen == "vllm":
                    self._report(node, word.node, f"`{'.'.join(key)}=vllm` makes the trainer generate with vLLM")
                    return
                variable = _VARIABLE.fullmatch(chosen)
                if variable is not None:
                    self._pending.append((node, word.node, ".".join(key), variable.group(1)))

    def _report(self, command: Node, at: Node, what: str) -> None:
        self._reported.add(command.start_byte)
        self.report(command, f"{what}: on Ascend it runs through the vllm-ascend plugin", _vllm.ROUTE,
                    offset=at.start_byte)
