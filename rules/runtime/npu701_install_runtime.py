"""NPU701: call ``npu_runtime.install()`` at the start of migrated entry points."""

from __future__ import annotations

import ast
import os
import re

import libcst as cst

from npu_migrate.pipeline import runtime_bundle
from npu_migrate.pipeline.entry_points import is_library, is_named_entry
from npu_migrate.pipeline.file_roles import is_test_path
from npu_migrate.python.cst_util import is_main_guard
from npu_migrate.python.imports import NPU_IS_CUDA, guard_text, runtime_install_in_block
from npu_migrate.python.rule import Example, Rule

INSTALL = "npu_runtime.install()"
#: The call where the import is guarded (``npu_runtime = None`` when it is missing).
GUARDED_INSTALL = "if npu_runtime is not None:\n    npu_runtime.install()\n"

#: Test code by its content: pytest imported at module level, a unittest.TestCase.
_TEST_CODE = re.compile(r"^(?:import pytest\b|from pytest\b)|\bunittest\.TestCase\b|^from unittest import .*\bTestCase\b",
                        re.MULTILINE)
#: The set-up of distributed or multi-process training.
_DISTRIBUTED = re.compile(r"\binit_process_group\s*\(|\b(?:mp|multiprocessing)\.(?:spawn|Process)\s*\(")
#: A backward pass, and a step (an optimizer's, a GradScaler's, DeepSpeed's engine's).
_BACKWARD = re.compile(r"\.backward\s*\(")
_STEP = re.compile(r"\.step\s*\(")


def trains(text: str) -> bool:
    """The file trains: it sets up distributed or multi-process training, or it both
    runs a backward pass and steps. A backward pass that no step follows is a
    benchmark or a gradient check (prime-rl's ``bench_fused_moe.py``, lingua's
    ``index_matmul.py``), not a job the runtime's launcher handling and watchdog serve."""
    return bool(_DISTRIBUTED.search(text)) or bool(_BACKWARD.search(text) and _STEP.search(text))


#: A script named for inference, generation or serving (``gen_img.py``,
#: ``anima_minimal_inference.py``, ``sample.py``, ``serve.py``, ``demo.py``).
_NOT_TRAINING_NAME = re.compile(
    r"(?:^|[_\-.])(?:gen|generate|generation|infer|inference|sample|sampling|demo|serve|server|app|predict|"
    r"eval|evaluate|export|chat|interactive)(?:[_\-.]|$)", re.IGNORECASE)
#: An optimizer: a file that builds one trains (its loop may be in another module).
_OPTIMIZER = re.compile(r"\boptim(?:izer)?\b|\boptim\.")
#: an endless loop: a worker that waits for requests (a one-shot generation job under
#: torchrun, such as torchtune's generate_v2_distributed or verl's converter, ends and is
#: served by the runtime like any job)
_SERVES = re.compile(r"\bwhile[ \t]+(?:True|1)[ \t]*:")
#: Generation and inference: what a process group is for when nothing in the file trains.
_GENERATES = re.compile(r"\.(?:stream_)?generate\s*\(|\binference_mode\s*\(|\bno_grad\s*\(")
#: A prompt read from the terminal: an interactive session, idle as long as the user is.
_PROMPT = re.compile(r"(?<![\w.])input\s*\(")


def _serves_or_generates(path: str, text: str) -> bool:
    """A script that only imports training code is an entry point of it unless it is
    named for inference or serving, or prompts at the terminal: sd-scripts' ``gen_img.py``
    imports ``library/train_util.py`` for its helpers and waits at ``input()`` in
    ``--interactive`` mode, where the runtime's hang watchdog, fed only by training
    steps, would end an idle session after half an hour."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return bool(_NOT_TRAINING_NAME.search(stem) or _PROMPT.search(text))


def is_test_module(path: str, text: str) -> bool:
    return is_test_path(path) or bool(_TEST_CODE.search(text))


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


class _FindsTraining(cst.CSTVisitor):
    """A ``.backward()`` call, or a call of one of ``trainers`` (functions of the file
    that call ``.backward()``)."""

    def __init__(self, trainers: set[str]) -> None:
        self.trainers = trainers
        self.found = False

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            self.found = True
        elif isinstance(func, cst.Name) and func.value in self.trainers:
            self.found = True
        return not self.found


def _training_functions(tree: ast.Module | None) -> set[str]:
    """Module-level functions whose body calls ``.backward()`` (from the whole file:
    elision may have left them out of the parsed module)."""
    if tree is None:
        return set()
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "backward"
                for c in ast.walk(node))
    }


def _trains(loop: cst.CSTNode, trainers: set[str]) -> bool:
    finder = _FindsTraining(trainers)
    loop.visit(finder)
    return finder.found


class InstallRuntime(Rule):
    id = "NPU701"
    name = "install-runtime"
    summary = "Insert `import npu_runtime` and one `npu_runtime.install()` call into migrated entry-point scripts"
    triggers = ()  # it only acts on files other rules changed
    local_triggers = ("npu_runtime",)  # an existing install() call anywhere in the file
    only_with_other_fixes = True
    rationale = """
A migrated script must keep training on Ascend clusters, where ranks arrive in
launcher-specific ways (ModelArts `MA_*`/`VC_*`, per-card ranktables, the Ascend
Operator's node RANK and `{0,1,2,3}` LOCAL_RANK), HCCL timeouts default to values
that make hangs burn half an hour, and jobs are restarted after failures.
`npu_runtime.install()` (shipped with npu-migrate, see the README's runtime
section) imports torch_npu when present, fills HCCL defaults that are unset,
turns launcher variables into torchrun's so the script's own
`init_process_group()` works unchanged, and starts a hang watchdog fed by every
optimizer step (disable with `NPU_RUNTIME_WATCHDOG=0`).

Where: only in training entry points that this run migrates for the NPU:

* the file is changed by another rule in a way that needs torch_npu (a file
  whose only change is `map_location="cpu"` or a renamed `CUDA_VISIBLE_DEVICES`
  runs fine without the runtime, and is never touched just to add it);
* the file trains: it calls `.backward()` and steps (`optimizer.step()`,
  `scaler.step(...)`, DeepSpeed's `engine.step()`), or sets up distributed or
  multi-process training (`init_process_group(...)`, `mp.spawn(...)`,
  `mp.Process(...)`, as in Hogwild); evaluation and export scripts, benchmarks
  and gradient checks (a backward pass that no step follows), and launchers whose
  training lives elsewhere without distributed set-up, do not get it;
  a script that trains only through a module it imports (ConvNeXt's `main.py`
  calling `engine.train_one_epoch`) gets it unless it is named for inference,
  generation or serving (`gen_img.py`, `*_inference.py`, `sample.py`, `serve.py`,
  `demo.py`, `eval.py`...) or prompts with `input()`: the watchdog, fed by training
  steps, would end an idle interactive session;
* it is an entry point: an `if __name__ == "__main__":` guard gets the call as
  its first statement, so importing the module (tests, notebooks) stays free of
  side effects; a script with a top-level training loop (a module-level
  `for`/`while` that calls `.backward()`, or a function of the file that does,
  such as `for epoch in range(n): train(epoch)`) gets it right after its
  top-level imports. Either way it goes ahead of other rules' set-up inserted at
  the same place (NPU510's `npu_runtime.init_data_parallel()`), so the watchdog
  and the translated launch variables are in place before the rendezvous;
* never in tests: files named like pytest or unittest modules (`test_*.py`,
  `*_test.py`, `conftest.py`, `tests.py`), files right inside a `tests/`,
  `test/` or `testing/` directory, and files that import pytest at module level
  or define a `unittest.TestCase`. A test runs in its runner's process; the
  runtime's launcher handling and watchdog belong to real training jobs.

Workers started with `torch.multiprocessing.spawn` / `mp.Process` run the
module again as `__mp_main__`, where the `__main__` guard (and so the call) does
not run; they are not injected into: `npu_runtime.install()` in the parent
carries over into spawned children by itself (see docs/runtime.md), so one call
in the parent's entry point covers them.

Entry points you name (`--entry FILE`, or `entry-points = ["main.py"]` in
`[tool.npu-migrate]`) get the call whether or not they train themselves (ConvNeXt,
DeiT and MAE train in modules their `main.py` imports), and whether or not any
other rule changes them (a `tools/train.py` whose CUDA code is all in the package
it imports), and are never treated as tests or library code.

Library code stays importable without npu_runtime: a module of a package (its
directory holds an `__init__.py`; see npu_migrate/pipeline/entry_points.py) never gets a
top-level `import npu_runtime`. A `__main__` demo block in such a module gets
`import npu_runtime` and the call inside the block; a package module without one is
left alone, and so is a demo block of a package module that does not train itself
(an environment report such as composer's `utils/collect_env.py`, which only imports
modules that train). Name it with `--entry` to make it an entry point. A script that another
file imports (library code by the project's import graph) and that has a `__main__`
block gets the same when it trains, itself or through a module of the project it
imports (DeiT's and DETR's `main.py`, imported by `run_with_submitit.py`, whose loop is
in `engine.py`): `python main.py` installs the runtime, `import main` does not need it.

Where npu-runtime is missing (a CPU development machine, an Ascend image built
without it), the entry point still starts: when `install()` is the file's only use
of npu_runtime, the import is guarded (`try: import npu_runtime` / `except
ImportError:` `npu_runtime = None` and one printed line saying what the job runs
without and how to install it), and the call is `if npu_runtime is not None:
npu_runtime.install()`. What is lost: the launcher-variable translation (plain
`torchrun` still works), the HCCL timeout defaults and the hang watchdog; nothing the
training computes. The calls other rules insert (`npu_runtime.data_parallel`,
`init_data_parallel`, `per_process_batch_size`, `is_main_process`,
`distribute_model`) change how the work is split between processes: a stand-in
that guessed them could train on the wrong shard or batch size without a word, so
where they are used the import stays a hard requirement. A package module's
`__main__` demo block imports npu_runtime inside the block: guarded the same way
where `install()` is its only use (`try: import npu_runtime` / `except ImportError:`
the printed line / `else: npu_runtime.install()`), unguarded where other calls need it.

A file that already mentions `npu_runtime` is left alone, so the rule is
idempotent. `npu-migrate --vendor-runtime DIR` copies the package into your tree
if the training image should not install npu-migrate.

A file that sets up a process group but has no backward pass, no optimizer, and generation
or inference code (`.generate(`, `torch.inference_mode()`, `torch.no_grad()`) serves a model:
LLaMA2-Accessory's model-parallel worker waits in a collective between requests, where the
hang watchdog would end it. It gets no `install()`.
"""
    examples = (
        Example(
            "import torch\n\ndef main():\n    torch.cuda.synchronize()\n    loss.backward()\n    optimizer.step()\n\n"
            "if __name__ == '__main__':\n    main()\n",
            "import torch\n\n"
            + guard_text(fallback=(NPU_IS_CUDA,))
            + "\ntry:\n    import npu_runtime\n"
            "except ImportError:  # the job still trains, without the runtime's install()\n"
            "    npu_runtime = None\n"
            '    print("npu-runtime is not installed: no launcher translation, HCCL defaults"\n'
            '          " or hang watchdog (pip install npu-runtime==0.1.0)")\n'
            "\ndef main():\n    torch.npu.synchronize()\n    loss.backward()\n    optimizer.step()\n\n"
            "if __name__ == '__main__':\n    if npu_runtime is not None:\n        npu_runtime.install()\n    main()\n",
            also=("NPU101",),
        ),
        Example("import torch\n\ndef helper():\n    torch.cuda.synchronize()\n"),
    )

    def _serves_distributed(self, text: str) -> bool:
        """A process group set up to serve, not to train: no backward pass and no optimizer
        in the file (a launcher whose loop is in another module builds its optimizer),
        generation or inference code, and an endless loop waiting for requests
        (LLaMA2-Accessory's ``multi_gpu_wrapper.py`` worker, held-out round 19: it waits in a
        collective between requests, and the watchdog would end it after half an hour idle)."""
        return (not _BACKWARD.search(text) and not _OPTIMIZER.search(text) and _GENERATES.search(text) is not None
                and _SERVES.search(text) is not None)

    def leave_file(self) -> None:
        text = self.ctx.text
        if "npu_runtime" in text:
            return
        facts = self.ctx.facts
        named = is_named_entry(self.ctx.path, facts)
        library = is_library(self.ctx.path, facts)
        body = self.ctx.module.body
        guard = next((s for s in body if is_main_guard(s)), None)
        # a script whose training is in a module of the project it imports (ConvNeXt's
        # main.py and engine.py): the entry point is the script, not the module. Imported
        # itself as well (DeiT's and DETR's main.py, which run_with_submitit.py imports),
        # it is library code with a demo block: the runtime goes inside the block, so
        # `python main.py` installs it and `import main` needs no npu_runtime.
        # Not a module of a package: its demo block installs the runtime only when the
        # module itself trains (composer's `utils/collect_env.py`, an environment report,
        # imports modules that train and is no training entry point).
        in_package = os.path.dirname(os.path.abspath(self.ctx.path)) in facts.package_dirs
        trains_through_import = (guard is not None and os.path.abspath(self.ctx.path) in facts.imports_training
                                 and not in_package and not _serves_or_generates(self.ctx.path, text))
        if not named and (not (trains(text) or trains_through_import)
                          or is_test_module(self.ctx.path, text) or self._serves_distributed(text)):
            return
        message = "call npu_runtime.install() at the start of the entry point"
        # Where install() is the file's only use of npu_runtime, the import is guarded
        # (npu_migrate/python/imports.py: the job starts where npu-runtime is missing, and
        # says so in one line) and the call runs only when the import worked. Other rules'
        # calls (npu_runtime.data_parallel, per_process_batch_size...) change what the
        # program computes, cannot degrade safely, and keep the import a hard requirement.
        others = any(r.module == "npu_runtime" and r.rule != self.id for r in self.ctx.import_requests)
        install = cst.parse_statement(INSTALL + "\n" if others else GUARDED_INSTALL)
        if guard is not None and isinstance(guard.body, cst.IndentedBlock) and guard.body.body:
            if library:
                # a package module's demo block: the import stays inside it, so that
                # importing the module never needs npu_runtime
                statements = ([cst.parse_statement("import npu_runtime\n"), cst.parse_statement(INSTALL + "\n")]
                              if others else [runtime_install_in_block(runtime_bundle.install_hint())])
                self.insert_before(guard.body.body[0], statements,
                                   message + " (imported there: the module is library code)", anchor=guard,
                                   first=True)
                return
            self.insert_before(guard.body.body[0], [install], message, anchor=guard, first=True)
        else:
            if library:
                return  # a module of a package that trains at import: not an entry point to inject into
            trainers = _training_functions(self.ctx.python_ast())
            loop = next((s for s in body if isinstance(s, (cst.For, cst.While)) and _trains(s, trainers)), None)
            if loop is None and named:
                # a named entry point that trains elsewhere and has no guard: after its imports
                imports = [s for s in body if _is_import(s)]
                if not imports:
                    return
                self.insert_after(imports[-1], [install], message, anchor=imports[-1], first=True)
                self.add_import("npu_runtime")
                return
            if loop is None:
                return
            # the call goes right after the last top-level import before the loop
            imports = [s for s in body[: body.index(loop)] if _is_import(s)]
            if imports:
                self.insert_after(imports[-1], [install], message, anchor=loop, first=True)
            else:
                self.insert_before(body[0], [install], message, anchor=loop, first=True)
        self.add_import("npu_runtime")  # placed with the file's imports (npu_migrate/python/imports.py)
