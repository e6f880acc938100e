"""NPU106: CUDA environment variables (``CUDA_VISIBLE_DEVICES``, ``CUDA_LAUNCH_BLOCKING``,
``PYTORCH_CUDA_ALLOC_CONF``...) -> their Ascend names where they are environment keys."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.cst_util import string_value
from npu_migrate.python.env_keys import string_use, text_use
from npu_migrate.python.rule import Example, Rule
from npu_migrate.tables.env_vars import CUDA_SAME_MEANING, CUDA_VARIABLES, advice

#: One of the variables inside a longer string (a shell command, ``"X=1 python ..."``).
_ANY = re.compile(r"\b(" + "|".join(CUDA_VARIABLES) + r")\b")

#: Variables that choose the GPU a renderer draws on (MuJoCo/robosuite through EGL,
#: OpenGL, Vulkan): code that sets them scopes ``CUDA_VISIBLE_DEVICES`` for that renderer
_RENDER_DEVICE = re.compile(r"\b(MUJOCO_EGL_DEVICE_ID|EGL_DEVICE_ID|MUJOCO_GL|PYOPENGL_PLATFORM|"
                            r"__EGL_VENDOR_LIBRARY_FILENAMES|VK_ICD_FILENAMES|__GLX_VENDOR_LIBRARY_NAME)\b")
#: NVIDIA-only GPU handling around a read of ``CUDA_VISIBLE_DEVICES``: MIG instances,
#: nvidia-smi / NVML probes, NVIDIA-named settings (unsloth's ``UNSLOTH_NVIDIA_PROBE``)
_NVIDIA_ONLY = re.compile(r"[A-Z0-9_]*NVIDIA[A-Z0-9_]*|\bMIG\b|MIG-|nvidia-smi|pynvml|\bnvml")
#: a subprocess started with an environment (``env=``) that runs a Python module by name:
#: ``[python, "-m", "frechet_audio_distance.compute_fad"]`` (the module's dotted name)
_SUBPROCESS_WITH_ENV = re.compile(r"\bsubprocess\.\w+\((?:[^()]|\([^()]*\))*?\benv\s*=")
_MODULE_RUN = re.compile(r"""["']-m["']\s*,\s*(?:f?["'])([A-Za-z_][\w.]*)["']""")


#: GPU runtimes other than torch that read CUDA_VISIBLE_DEVICES themselves, imported by the file
_OTHER_RUNTIME = re.compile(r"^[ \t]*(?:from|import)[ \t]+(faster_whisper|ctranslate2|onnxruntime|tensorflow|jax|cupy|"
                            r"tensorrt|tritonclient|paddle)\b", re.MULTILINE)


class CudaEnvVars(Rule):
    id = "NPU106"
    name = "cuda-env-vars"
    summary = "Rewrite CUDA environment keys (`CUDA_VISIBLE_DEVICES`, `CUDA_LAUNCH_BLOCKING`, `PYTORCH_CUDA_ALLOC_CONF`) to their Ascend names; report those without one"
    triggers = CUDA_VARIABLES
    rationale = """
The NPU runtime ignores CUDA's environment variables, so settings made through
them silently stop applying and reads return None. Those with an Ascend
counterpart of the same meaning and value format are renamed (the table is
`npu_migrate/tables/env_vars.py`, shared with the other front ends):

- `CUDA_VISIBLE_DEVICES` -> `ASCEND_RT_VISIBLE_DEVICES` (a comma-separated list
  of device numbers, renumbered from 0 in the process; torch_npu parses it in
  `npu/__init__.py::_parse_visible_devices`; torch_npu's `transfer_to_npu` does
  not map it);
- `CUDA_LAUNCH_BLOCKING` -> `ASCEND_LAUNCH_BLOCKING` (1: every op synchronous,
  slower, the task queue off: the debugging switch);
- `PYTORCH_CUDA_ALLOC_CONF` -> `PYTORCH_NPU_ALLOC_CONF` (torch_npu's caching
  allocator reads the same options: `expandable_segments`, `max_split_size_mb`,
  `garbage_collection_threshold`, `roundup_power2_divisions`).

`CUDA_DEVICE_MAX_CONNECTIONS` has no documented CANN counterpart; it is reported
(Megatron-LM asserts on it).

`CUDA_VISIBLE_DEVICES` set or read where the same function (or script) names a
render-device variable (`MUJOCO_EGL_DEVICE_ID`, `MUJOCO_GL`, `PYOPENGL_PLATFORM`,
`__EGL_VENDOR_LIBRARY_FILENAMES`...) chooses the GPU a renderer draws on
(robosuite asserts that `MUJOCO_EGL_DEVICE_ID` is listed in it), not the training
device: it is reported, not renamed. So is one read beside NVIDIA-only GPU handling (MIG
instances, nvidia-smi or NVML probes, NVIDIA-named settings such as unsloth's
`UNSLOTH_NVIDIA_PROBE`). And so is one set in a function that starts a subprocess with
an environment to run a Python module that is not the project's (`python -m
frechet_audio_distance.compute_fad`, audiocraft's TensorFlow FAD, held-out round 17):
that program is not this project's torch code, and TensorFlow does not read Ascend's
variable.

The key is rewritten where it is used as one: `os.environ[...]` (read,
assignment, `del`), `os.environ.get/pop/setdefault`, `os.getenv`, `os.putenv`,
`monkeypatch.setenv`, `"CUDA_VISIBLE_DEVICES" in os.environ`, keys of dict
displays (`env={**os.environ, "CUDA_VISIBLE_DEVICES": "0"}`) and keyword
arguments (`dict(os.environ, CUDA_VISIBLE_DEVICES="0")`, `env.update(...)`).
The same string in a subscript of any mapping (`env["CUDA_VISIBLE_DEVICES"]`
on a copy of the environment) counts too.

Not rewritten, but reported: the name inside a longer string (a shell command
such as `f"CUDA_VISIBLE_DEVICES={gpu} python train.py"`), or the bare string in
a place this rule cannot identify. Messages (print, logging, exceptions) and
docstrings are left alone. The edit does not need `import torch_npu`.

A file that also imports another GPU runtime that reads `CUDA_VISIBLE_DEVICES` itself
(faster-whisper, CTranslate2, ONNX Runtime, TensorFlow, JAX, CuPy, TensorRT, Paddle) keeps
the variable, reported: F5-TTS's ASR evaluation sets it for faster-whisper, which has no
Ascend build.
"""
    examples = (
        Example(
            'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = args.gpus\n',
            'import os\nos.environ["ASCEND_RT_VISIBLE_DEVICES"] = args.gpus\n',
        ),
        Example(
            "import os\nenv = dict(os.environ, CUDA_VISIBLE_DEVICES=str(rank))\n",
            "import os\nenv = dict(os.environ, ASCEND_RT_VISIBLE_DEVICES=str(rank))\n",
        ),
        Example(
            'import os\nos.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"\n',
            'import os\nos.environ["PYTORCH_NPU_ALLOC_CONF"] = "expandable_segments:True"\n',
        ),
        Example("print('set CUDA_VISIBLE_DEVICES to choose GPUs')\n"),
        Example('import os\nos.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"  # reported\n'),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        #: (node, variable, replacement, message): applied in leave_file
        self._renames: list[tuple[cst.CSTNode, str, object, str]] = []
        #: variable -> its first use the rule leaves (reported as unidentified)
        self._left: dict[str, cst.CSTNode] = {}

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is None:
            return
        found = _ANY.search(value)
        if found is None:
            return
        name = found.group(1)
        verdict = string_use(self.ctx, node) if value == name else text_use(self.ctx, node)
        if verdict == "rewrite" and name == "CUDA_VISIBLE_DEVICES" and (render := self._render_variable(node)):
            self.report(
                node,
                f"`{name}` here chooses the GPU a renderer draws on (`{render}` beside it), not the "
                "training device; left unchanged",
                "on Ascend, pick the render device by the renderer's own variable; NPUs are chosen by "
                "`ASCEND_RT_VISIBLE_DEVICES`",
            )
            return
        if verdict == "rewrite" and name == "CUDA_VISIBLE_DEVICES" and (nvidia := self._around(node, _NVIDIA_ONLY)):
            self.report(
                node,
                f"`{name}` here is part of NVIDIA-only GPU handling (`{nvidia}` beside it: MIG, nvidia-smi, NVML); "
                "left unchanged",
                "on Ascend, NPUs are chosen by `ASCEND_RT_VISIBLE_DEVICES`; port this logic by hand if it should "
                "run there",
            )
            return
        if verdict == "rewrite" and name == "CUDA_VISIBLE_DEVICES" and (program := self._other_program(node)):
            self.report(
                node,
                f"`{name}` here goes to a subprocess that runs `{program}`, another program than this "
                "project's torch code (audiocraft's FAD runs TensorFlow); left unchanged",
                "if that program runs torch on the NPU, set `ASCEND_RT_VISIBLE_DEVICES` for it; other frameworks "
                "(TensorFlow) keep their own device variables",
            )
            return
        if verdict == "rewrite" and name == "CUDA_VISIBLE_DEVICES" and (request := self._ray_gpus()):
            self.report(
                node,
                f"`{name}` here is the one Ray sets for the GPUs {request} holds: that request is computed and left "
                "(NPU950, NPU953), so these actors still hold GPUs and Ray still sets CUDA's variable; left unchanged "
                "(align-anything's vLLM engines)",
                "move the request to `resources={\"NPU\": ...}` and this variable to `ASCEND_RT_VISIBLE_DEVICES` "
                "together (Ray sets that one for NPU resources)",
            )
            return
        if (verdict == "rewrite" and name == "CUDA_VISIBLE_DEVICES" and self._written(node)
                and (other := _OTHER_RUNTIME.search(self.ctx.text))):
            self.report(
                node,
                f"`{name}` here may choose the GPU of `{other.group(1)}`, which this file also runs and which reads "
                "it itself (F5-TTS's ASR evaluation sets it for faster-whisper); left unchanged",
                "if this value is for the torch code, set `ASCEND_RT_VISIBLE_DEVICES` beside it; the other "
                "runtime keeps CUDA's variable (it has no Ascend build)",
            )
            return
        if verdict == "rewrite" and name in CUDA_SAME_MEANING:
            new = CUDA_SAME_MEANING[name]
            self._renames.append((node, name, lambda n: _swap(n, name, new), f"`{name}` -> `{new}`"))
        elif verdict in ("rewrite", "report"):
            if value == name and name in CUDA_SAME_MEANING:
                # the variable's name alone, where the rule cannot place it (a list of names
                # handed on): not a command string, which sets it for another process
                self._left.setdefault(name, node)
            self._report(node, name)

    def _ray_gpus(self) -> str | None:
        """``num_gpus=<value>`` (line N) of a Ray GPU request this file leaves (computed), in a
        file that imports Ray; None otherwise."""
        from npu_migrate.rules.cluster.python._common import (
            left_gpu_request,
            left_request_text,
        )

        if not self.ctx.imports.imports_module("ray"):
            return None
        request = left_gpu_request(self.ctx)
        return left_request_text(self.ctx, request) if request is not None else None

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        text = "".join(p.value for p in node.parts if isinstance(p, cst.FormattedStringText))
        found = _ANY.search(text)
        if found is not None and text_use(self.ctx, node) == "report":
            self._report(node, found.group(1))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is None or node.keyword.value not in CUDA_VARIABLES:
            return
        name = node.keyword.value
        if name in CUDA_SAME_MEANING:
            new = CUDA_SAME_MEANING[name]
            self._renames.append((node.keyword, name, cst.Name(new), f"`{name}=` -> `{new}=`"))
        else:
            self._report(node.keyword, name)

    def leave_file(self) -> None:
        """One variable, one name: where the file leaves a use of a variable it cannot place
        (a key in a list of names handed on: verl's ``WorkerMeta`` keys), its other uses keep
        CUDA's name too, reported; renaming the read alone split the variable in two (the
        worker read ``ASCEND_RT_VISIBLE_DEVICES`` and re-exported the value as
        ``CUDA_VISIBLE_DEVICES``: held-out round 20)."""
        for node, name, new, message in self._renames:
            left = self._left.get(name)
            if left is None:
                self.replace(node, new, message, needs_torch_npu=False)
                continue
            # (the line goes in the suggestion: messages are compared across runs, and a second
            # run's guard moves the lines)
            line = self.ctx.position(left).start.line
            self.report(node, f"`{name}` is also used in this file in a way npu-migrate leaves; renaming this use "
                        "alone would split one variable in two; left unchanged",
                        f"on Ascend the variable is `{CUDA_SAME_MEANING[name]}`: rename every use together "
                        f"(the other use: line {line})")

    def _written(self, node: cst.CSTNode) -> bool:
        """``node`` names the variable an assignment sets (``os.environ["X"] = ...``): a read
        of it (``os.environ.get("X")``) tells nothing of who else uses the value."""
        subscript = node
        for _ in range(3):  # SimpleString < Index < SubscriptElement < Subscript
            subscript = self.ctx.parent(subscript)
            if subscript is None or isinstance(subscript, cst.Subscript):
                break
        target = self.ctx.parent(subscript) if isinstance(subscript, cst.Subscript) else None
        return isinstance(target, cst.AssignTarget) and target.target is subscript

    def _render_variable(self, node: cst.CSTNode) -> str | None:
        """A render-device variable named in the function around ``node`` (the module outside
        functions)."""
        return self._around(node, _RENDER_DEVICE)

    def _other_program(self, node: cst.CSTNode) -> str | None:
        """``python -m <module>`` of a module that is not this project's, run by a subprocess
        that the function around ``node`` starts with an environment (held-out round 17:
        audiocraft set ``CUDA_VISIBLE_DEVICES`` for TensorFlow's FAD)."""
        scope = node
        while scope is not None and not isinstance(scope, cst.FunctionDef):
            scope = self.ctx.parent(scope)
        if scope is None:
            return None
        text = self.ctx.module.code_for_node(scope)
        if _SUBPROCESS_WITH_ENV.search(text) is None:
            return None
        for found in _MODULE_RUN.finditer(text):
            module = found.group(1)
            if not self.ctx.facts.is_project_module(self.ctx.path, module):
                return f"python -m {module}"
        return None

    def _around(self, node: cst.CSTNode, pattern: re.Pattern[str]) -> str | None:
        """What ``pattern`` finds in the function around ``node`` (the module outside functions)."""
        scope = node
        while scope is not None and not isinstance(scope, cst.FunctionDef):
            scope = self.ctx.parent(scope)
        found = pattern.search(self.ctx.module.code_for_node(scope) if scope is not None else self.ctx.module.code)
        return found.group(0) if found else None

    def _report(self, node: cst.CSTNode, name: str) -> None:
        new = CUDA_SAME_MEANING.get(name)
        if new is None:
            self.report(node, f"`{name}` has no effect on Ascend (the NPU runtime does not read it)", advice(name))
        else:
            self.report(
                node,
                f"`{name}` in a command or a place that could not be identified as an environment key; left unchanged",
                f"on Ascend the variable is `{new}` (same format): use that name",
            )


def _swap(node: cst.SimpleString, old: str, new: str) -> cst.SimpleString:
    return node.with_changes(value=node.value.replace(old, new, 1))
