"""NPU967: Megatron-LM launchers: the MindSpeed options that replace Megatron's CUDA-only kernels."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

#: a Megatron-LM entry script (pretrain_gpt.py, pretrain_mamba.py, examples/.../pretrain_*.py)
_ENTRY = re.compile(r"(?:^|/)pretrain_\w+\.py$")
#: the same script named as one word of a command kept in a string (``run_cmd="torchrun ... pretrain_gpt.py ..."``)
_ENTRY_WORD = re.compile(r"(?:^|[\s/\"'])pretrain_\w+\.py(?=$|[\s\"';])")
_SOURCE = "MindSpeed mindspeed/arguments.py"
#: (option Megatron takes, its value or None, MindSpeed's option for it, what MindSpeed requires)
FUSED = (
    ("--normalization", "RMSNorm", "--use-fused-rmsnorm", "`--use-fused-rmsnorm` needs `--normalization RMSNorm`"),
    ("--swiglu", None, "--use-fused-swiglu", "`--use-fused-swiglu` needs `--swiglu`"),
    ("--position-embedding-type", "rope", "--use-fused-rotary-pos-emb",
     "`--use-fused-rotary-pos-emb` needs `--position-embedding-type rope`"),
)
_LAUNCHER = re.compile(r"(?:^|[\s/\"'])(?:torchrun|deepspeed|python3?|torch\.distributed\.(?:run|launch))(?=$|[\s\"'])")


def _launch_in_string(raw: bytes) -> bool:
    """A launcher and a ``pretrain_*.py`` script written as words of one assigned string."""
    text = raw.decode("utf-8", "replace")
    return bool(_LAUNCHER.search(text) and _ENTRY_WORD.search(text))


def _start(word: syntax.Arg) -> int:
    """Where the word itself starts: inside an option string, its own line, not the string's."""
    return next((p.start for p in word.pieces if p.start is not None), word.node.start_byte)


#: Megatron's FP8 formats and recipes (megatron/core/transformer/transformer_config.py at d98e8a64:
#: ``fp8: Optional[str]`` "e4m3" or "hybrid"; ``fp8_recipe``: delayed, tensorwise, mxfp8, blockwise, custom)
_FP8_FORMATS = {"e4m3", "hybrid"}
_FP8_RECIPES = {"delayed", "tensorwise", "mxfp8", "blockwise", "custom"}
_TRUE = {"true", "True", "1", "yes"}
#: Megatron's MoE token dispatcher settings that run DeepEP/HybridEP (transformer_config.py at
#: d98e8a64: ``moe_flex_dispatcher_backend: Literal['deepep', 'hybridep', 'ncclep'] = "deepep"``,
#: used by ``moe_token_dispatcher_type == "flex"``; ``moe_enable_deepep`` is its deprecated switch)
_DEEPEP = ("the flex token dispatcher runs DeepEP/HybridEP (NVSHMEM, CUDA-only); MindSpeed (at 028de58c) has no "
           "flex dispatcher, its MoE options check `alltoall`, `alltoall_seq` and `allgather` (mindspeed/arguments.py, "
           "mindspeed/features_manager/moe): set `moe_token_dispatcher_type` to `alltoall` "
           "(`--moe-token-dispatcher-type alltoall`)")


def megatron_setting(name: str, value: str | None) -> str | None:
    """``"deepep"`` or ``"fp8"`` when ``name value`` (a Megatron-LM option or the last key of a
    Hydra override of Megatron's config, ``model.moe_flex_dispatcher_backend=hybridep``) turns on
    DeepEP/HybridEP or FP8 training, else None."""
    key = name.lstrip("-+").replace("-", "_").rpartition(".")[2]
    value = (value or "").strip("\"'")
    if key == "moe_token_dispatcher_type" and value == "flex":
        return "deepep"
    if key == "moe_enable_deepep" and (value in _TRUE or name.startswith("--")):  # a store_true option
        return "deepep"
    if not name.startswith("-") and ((key == "fp8" and value in _FP8_FORMATS) or
                                     (key == "fp8_recipe" and value in _FP8_RECIPES)):
        return "fp8"
    return None


def _printed(node: Node) -> bool:
    """The word is an argument of ``echo``/``printf`` (a message, not a setting)."""
    while node is not None and node.type != "command":
        node = node.parent
    words = syntax.command_args(node) if node is not None else []
    return bool(words) and syntax.program(words[0]) in ("echo", "printf")


_TE = ("Transformer Engine is CUDA-only; MindSpeed's quick start (docs/zh/user-guide/quickstart.md) launches "
       "pretrain_gpt.py with `--transformer-impl local`")
_FP8 = "Atlas A2/A3 have no FP8 matmul: drop the --fp8-* options and train in bf16 (--bf16)"


class ShellMegatronLauncher(ShellRule):
    id = "NPU967"
    name = "shell-megatron-launcher"
    impact = "review"
    fixable = False
    summary = ("Report Megatron-LM launcher options to change for MindSpeed: its fused RMSNorm/SwiGLU/RoPE options, "
               "`--transformer-impl transformer_engine`, FP8; Megatron's flex (DeepEP) dispatcher and FP8 also as "
               "Hydra overrides")
    triggers = (b"pretrain_", b"dispatcher", b"deepep", b"fp8")
    rationale = f"""
On Ascend, Megatron-LM runs through MindSpeed (`import mindspeed.megatron_adaptor`
in the entry script, NPU966), which reads extra options of its own. Checked in
{_SOURCE} (Ascend/MindSpeed master, `_add_network_size_args` and its validation):
`--use-fused-rmsnorm` (requires `--normalization RMSNorm`), `--use-fused-swiglu`
(requires `--swiglu`) and `--use-fused-rotary-pos-emb` (requires
`--position-embedding-type rope`) select torch_npu's fused kernels in place of the
CUDA fusions Megatron uses for those layers; `--use-flash-attn` stays as it is
(MindSpeed maps it to its fusion attention). A launcher that starts a
`pretrain_*.py` script (on its command line, through a variable holding the script's
path, or as a command kept in a string and run with `eval`: `run_cmd="torchrun
$DISTRIBUTED_ARGS pretrain_qwen.py ${{megatron_options}}"`) and sets the layer without MindSpeed's option gets a
finding naming the option to add; `--transformer-impl transformer_engine` ({_TE})
and FP8 options ({_FP8}) are reported too.

Megatron's own settings that need CUDA are reported wherever a script writes them, as
Megatron-LM options or as Hydra overrides of Megatron's config (Megatron-Bridge's
`run_recipe.py ... model.fp8=e4m3 model.fp8_recipe=mxfp8`), one finding per command or
option string: the flex MoE token dispatcher (`moe_token_dispatcher_type=flex`,
`moe_enable_deepep=true`, `--moe-enable-deepep`; {_DEEPEP}; the backend name alone,
`moe_flex_dispatcher_backend=deepep`, is read by Megatron only under it) and FP8 (`fp8=e4m3|hybrid`, `fp8_recipe=...`; {_FP8}).

Not rewritten: the options are MindSpeed's, and plain Megatron-LM rejects them
("unrecognized arguments"), so they belong in the launcher only once the entry
script imports the adaptor and MindSpeed is installed (from source, at the
branch that matches the Megatron-LM release).
"""
    examples = (
        Example("torchrun --nproc_per_node 8 pretrain_gpt.py --swiglu --normalization RMSNorm  # reported\n"),
        Example("torchrun --nproc_per_node 8 train.py --swiglu\n"),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self.words: list[syntax.Arg] = []
        self.megatron = False

    def visit_command(self, node: Node) -> None:
        launch = syntax.launch_args(node)
        if launch is not None and any(_ENTRY.search(w.text) for w in launch[1]):
            self.megatron = True

    def visit_variable_assignment(self, node: Node) -> None:
        value = node.child_by_field_name("value")
        text = syntax.static_value(value) if value is not None else None
        if text is not None and _ENTRY.search(text):
            self.megatron = True  # PRETRAIN_SCRIPT_PATH="pretrain_gpt.py", then torchrun ... $PRETRAIN_SCRIPT_PATH
        elif value is not None and _launch_in_string(value.text or b""):
            self.megatron = True  # run_cmd="torchrun $DISTRIBUTED_ARGS pretrain_qwen.py ${megatron_options}"; eval $run_cmd

    def visit_word(self, node: Node) -> None:
        self.words.append(syntax.arg(node))

    def visit_string(self, node: Node) -> None:
        self.words.extend(syntax.string_args(node))

    visit_raw_string = visit_string

    def leave_file(self) -> None:
        self._settings()
        if not self.megatron:
            return
        texts = [w.text for w in self.words]
        values: dict[str, tuple[syntax.Arg, str | None]] = {}
        for index, word in enumerate(self.words):
            if not word.text.startswith("--"):
                continue
            name, equals, value = word.text.partition("=")
            if not equals and index + 1 < len(texts) and not texts[index + 1].startswith("-"):
                value = texts[index + 1]
            values.setdefault(name, (word, value if equals or value else None))
        for option, wanted, fused, needs in FUSED:
            found = values.get(option)
            if found is None or fused in texts:
                continue
            word, value = found
            if wanted is not None and value != wanted:
                continue
            self.report(word.node, f"`{option}{' ' + wanted if wanted else ''}` uses Megatron's CUDA fusion for this layer",
                        f"with MindSpeed add `{fused}` ({needs}; {_SOURCE})", offset=_start(word))
        impl = values.get("--transformer-impl")
        if impl is not None and impl[1] == "transformer_engine":
            self.report(impl[0].node, "`--transformer-impl transformer_engine` builds the layers with Transformer Engine",
                        f"use `--transformer-impl local` ({_TE})", offset=_start(impl[0]))
        fp8 = next((values[name] for name in values if name.startswith("--fp8")), None)
        if fp8 is not None:
            self.report(fp8[0].node, f"`{fp8[0].text.split('=')[0]}` trains in FP8", _FP8, offset=_start(fp8[0]))

    def _settings(self) -> None:
        """DeepEP and FP8 turned on through Megatron's config: one finding per kind and statement."""
        seen: set[tuple[str, int]] = set()
        for index, word in enumerate(self.words):
            name, equals, value = word.text.partition("=")
            if not equals:
                if not name.startswith("--"):
                    continue
                following = self.words[index + 1].text if index + 1 < len(self.words) else ""
                value = "" if following.startswith("-") else following
            kind = megatron_setting(name, value)
            if kind is None or _printed(word.node):
                continue
            statement = syntax.top_statement(word.node).start_byte
            if (kind, statement) in seen:
                continue
            seen.add((kind, statement))
            flag = name.replace("_", "-").endswith("enable-deepep")  # store_true: the next word is not its value
            shown = word.text if equals or flag else f"{name} {value}".strip()
            if kind == "deepep":
                self.report(word.node, f"`{shown}` sends MoE tokens through DeepEP/HybridEP", _DEEPEP, offset=_start(word))
            else:
                self.report(word.node, f"`{shown}` trains in FP8 (Megatron/Transformer Engine)", _FP8,
                            offset=_start(word))
