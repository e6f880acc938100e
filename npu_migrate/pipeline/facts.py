"""Facts about the whole project that single-file rules need.

Some decisions cannot be made one file at a time: the epoch loop that should
call ``sampler.set_epoch`` often lives in another file than the sampler, and a
``kernels`` package full of Triton code is imported by the file that gates it on
``x.is_cuda``. The CLI gathers these facts with a cheap text scan of every
discovered file before the per-file work starts, and they are part of the cache
key.
"""

from __future__ import annotations

import ast
import collections
import functools
import hashlib
import os
import re
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from npu_migrate.tables.packages import NO_ASCEND_IMPORT

_SET_EPOCH = re.compile(rb"\.set_epoch\s*\(")
#: A module that is Triton/Helion/CuPy/PyCUDA code: it imports one of them unconditionally
#: (at column 0) or defines a Triton kernel.
_CUDA_ONLY_MODULE = re.compile(
    rb"^(?:(?:import|from)[ \t]+(?:triton|helion|tilelang|cupy|cupyx|pycuda|cutlass|cuda\.tile)\b"
    rb"|[ \t]*@(?:triton\.(?:jit|autotune|heuristics)|helion\.kernel)\b)",
    re.MULTILINE,
)
#: ``import npu_runtime`` / ``from npu_runtime import ...`` at the start of a line (what
#: NPU701 writes, in any block).
IMPORTS_RUNTIME = re.compile(rb"^[ \t\f]*(?:import[ \t]+npu_runtime\b|from[ \t]+npu_runtime[ \t.])", re.MULTILINE)
#: What may be named only where it is defined (:attr:`ProjectFacts.unread_names`): a
#: function defined at column 0, an attribute assigned on ``self``.
_DEFINED_NAME = re.compile(rb"^(?:async[ \t]+)?def[ \t]+(\w+)|\bself\.(\w+)[ \t]*(?::[^=\n]*)?=(?!=)", re.MULTILINE)
#: Where a project says which Python it installs (the version is group 1).
_PYTHON_VERSION = re.compile(
    rb"""(?:requires-python|python_requires)[ \t]*=[ \t]*['"][ \t]*==[ \t]*(3\.\d+)"""
    rb"""|^[ \t]*-[ \t]*python[ \t]*={1,2}[ \t]*(3\.\d+)"""
    rb"""|conda[ \t]+create\b[^\n]{0,200}?\bpython[ \t]*={1,2}[ \t]*(3\.\d+)"""
    rb"""|^[ \t]*FROM[ \t]+(?:docker\.io/)?(?:library/)?python:(3\.\d+)""", re.MULTILINE | re.IGNORECASE)
#: A document that installs the project into the environment it creates: ``pip install -r
#: requirements.txt``, ``pip install -e .``, ``pip install .`` (VideoMAEv2's INSTALL.md; a
#: chatbot README that installs other packages into its own python=3.8 says nothing of it)
_INSTALLS_PROJECT = re.compile(rb"pip3?[ \t]+install[ \t]+(?:-r[ \t]+\S*requirements\S*|(?:-e[ \t]+)?\.(?:\[[\w,]+\])?(?=[ \t]*$))",
                               re.MULTILINE)
#: ``gpu: true`` in a cog.yaml (under ``build:``)
_COG_GPU = re.compile(rb"^[ \t]+gpu[ \t]*:[ \t]*(?:true|True|yes)\b", re.MULTILINE)
#: A word, as Python and every text format of the project spell names.
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
#: Files larger than this are data (results, datasets): their words are not counted.
_COUNTED_BYTES = 4 << 20
#: ``from .swiglu import ...`` in a package's ``__init__.py``.
_RELATIVE_IMPORT = re.compile(rb"^from[ \t]+\.(\w+)[ \t]+import\b", re.MULTILINE)


def module_file(path: str) -> str:
    """The absolute path that names a module: ``a/b.py`` -> ``/.../a/b``,
    ``a/b/__init__.py`` -> ``/.../a/b``."""
    stem = os.path.splitext(os.path.abspath(path))[0]
    return os.path.dirname(stem) if os.path.basename(stem) == "__init__" else stem


def _suffixes(file: str) -> list[str]:
    """Every dotted module name a module file may be imported as (``b``, ``a.b``...)."""
    parts = [p for p in file.split(os.sep) if p]
    return [".".join(parts[i:]) for i in range(len(parts) - 1, -1, -1) if parts[i].isidentifier()][:8]
#: ``DataParallel(`` as a call, not ``DistributedDataParallel(`` or ``isinstance(m, DataParallel)``
_DATA_PARALLEL_CALL = re.compile(rb"\bDataParallel\s*\(")
#: ``timm==0.3.2`` / ``"timm>=1.0.12",`` in a dependency file: the specifier (NPU923
#: passes a device to timm's NativeScaler only where every allowed timm takes one).
_TIMM_REQUIREMENT = re.compile(rb"""^[ \t\-"']*timm[ \t]*((?:[<>=!~]=?[ \t]*[\w.*+!-]+[ \t]*,?[ \t]*)+)""", re.MULTILINE)
#: ``transformers>=4.53.3`` / ``"transformers==5.15",`` / ``transformers[torch] ~= 4.51`` in a
#: dependency file: the specifier (NPU920/936/940 keep flash_attention_2 where every one
#: admits only transformers >= 4.51; :mod:`npu_migrate.pipeline.attention`).
#: At the start of a line or inside an inline list (``install_requires=["torch", "transformers>=4.53"]``).
_TRANSFORMERS_REQUIREMENT = re.compile(
    rb"""(?:^|(?<=[\[,(]))[ \t\-"']*transformers(?:\[[\w, \t-]*\])?[ \t]*((?:[<>=!~]=?=?[ \t]*[\w.*+!-]+[ \t]*,?[ \t]*)+)""",
    re.MULTILINE)
#: ``torch==2.2.2`` / ``"torch>=2.1,<2.3"`` / a conda environment's ``- pytorch=2.2.2`` (conda's
#: ``=`` is a prefix match: ``==2.2.2.*``): NPU301 writes ``torch.npu.amp.GradScaler`` where every
#: allowed torch predates ``torch.amp.GradScaler`` (2.3).
_TORCH_REQUIREMENT = re.compile(
    rb"""(?:^|(?<=[\[,(]))[ \t\-"']*(?:py)?torch(?![\w-])(?:\[[\w, \t-]*\])?[ \t]*((?:[<>=!~]=?=?[ \t]*[\w.*+!-]+[ \t]*,?[ \t]*)+)""",
    re.MULTILINE)
#: The project's own attention-class registry for flash-attention (InternVL's
#: ``INTERNLM2_ATTENTION_CLASSES = {'eager': ..., 'flash_attention_2': ...}`` or a packed-training
#: patch ``LLAMA_ATTENTION_CLASSES['flash_attention_2'] = ...``): NPU920 then reports instead of
#: choosing "sdpa", which such model code may not have.
_FLASH_REGISTRY = re.compile(rb"""\{[^{}]*?['"]flash_attention_2['"]\s*:[^{}]*\}|\[\s*['"]flash_attention_2['"]\s*\]\s*=""")
#: The file trains: a backward pass, or the set-up of distributed training (NPU701's
#: test for an entry point, :mod:`npu_migrate.pipeline.entry_points`). A method named
#: ``init_process_group`` is no call of it (verl's checkpoint engines define one).
TRAINS = re.compile(rb"\.backward\s*\(|(?<!def )\binit_process_group\s*\(|\b(?:mp|multiprocessing)\.(?:spawn|Process)\s*\(")
#: ``import a.b, c as d`` / ``from a.b import c, d``, at any indentation (imports inside
#: functions and ``try`` blocks count); relative imports are left out (package modules
#: are library code already).
_IMPORT = re.compile(rb"^[ \t]*(?:import[ \t]+([\w., \t]+)|from[ \t]+(\w[\w.]*)[ \t]+import[ \t]+\(?[ \t]*([\w, \t]*))",
                     re.MULTILINE)
#: Words without which :data:`TRAINS` and :data:`_CUDA_ONLY_MODULE` cannot match.
_TRAINS_WORDS = (b".backward", b"init_process_group", b".spawn", b".Process")
_CUDA_ONLY_WORDS = (b"triton", b"helion", b"tilelang", b"cupy", b"pycuda", b"cutlass", b"cuda.tile")
#: a dependency file named for the NPU (``requirements-npu.txt``, ``environment_ascend.yml``)
_ASCEND_NAME = re.compile(r"(?:^|[^a-z0-9])(?:npu|ascend)(?:[^a-z0-9])", re.IGNORECASE)
_DEPENDENCY_FILE = re.compile(r"(requirements.*\.txt|.*constraints.*\.txt|setup\.py|setup\.cfg|pyproject\.toml|environment.*\.ya?ml|conda(?:[-_].*)?\.ya?ml)")


#: a module-level definition of a pytest mark or a tuple of marks, or a ``requires_*`` function
_DEFINES_MARKS = re.compile(rb"^(?:\w+[ \t]*=[ \t]*[(\[]?[ \t\n]*pytest\.mark\.|def[ \t]+requires_\w*[ \t]*\()",
                            re.MULTILINE)
_TEST_MODULE_NAME = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test)\.py$")


def may_define_skip_marks(path: str, data: bytes) -> bool:
    """A module that may define the project's CUDA skip marks for other modules (not a
    test module, which no other module imports: a ``conftest.py`` or a testing helper)."""
    return (path.endswith(".py") and b"skipif" in data and b"torch.cuda" in data
            and not _TEST_MODULE_NAME.search(path.replace("\\", "/")) and _DEFINES_MARKS.search(data) is not None)


#: ``pip install ... transformers==4.51.3 ...`` (also ``uv pip``, ``python -m pip``, quoted)
_PIP_INSTALL = re.compile(rb"^[^\n#]*\bpip3?[ \t]+install\b[^\n]*$", re.MULTILINE)


def _pip_install_specifiers(data: bytes, name: bytes) -> list[str]:
    """The version specifiers ``name`` gets in the ``pip install`` lines of a shell script."""
    pattern = re.compile(rb"""(?:^|[\s"'])""" + re.escape(name) + rb"""(?:\[[\w,-]*\])?((?:[<>=!~]=?=?[\w.*+!-]+,?)+)""")
    return [m.group(1).decode("ascii", "replace").strip(",")
            for line in _PIP_INSTALL.finditer(data) for m in pattern.finditer(line.group())]


def _installs_environment(path: str) -> bool:
    """A file that builds the project's environment: a Dockerfile, a shell script, a CI
    workflow (``.github/workflows/*.yml``)."""
    name = os.path.basename(path)
    return (name.startswith("Dockerfile") or name.endswith((".dockerfile", ".sh"))
            or ("/.github/workflows/" in path.replace("\\", "/") and name.endswith((".yml", ".yaml"))))


def _transformers_specifiers(path: str, data: bytes) -> list[str]:
    """The version specifiers of every transformers requirement of one dependency file
    (:func:`_specifiers`)."""
    return _specifiers(path, data, "transformers", _TRANSFORMERS_REQUIREMENT)


def _torch_specifiers(path: str, data: bytes) -> list[str]:
    """The same for torch (``pytorch`` in a conda environment)."""
    found = _specifiers(path, data, "torch", _TORCH_REQUIREMENT)
    # conda's `pytorch=2.2.2` means 2.2.2 or any release under it
    return [f"=={spec[1:]}.*" if re.fullmatch(r"=[\d.]+", spec) else spec for spec in found]


def _specifiers(path: str, data: bytes, name: str, pattern: re.Pattern[bytes]) -> list[str]:
    """The version specifiers of every ``name`` requirement of one dependency file. A
    ``pyproject.toml`` is read as TOML, and each string of its dependency tables as a
    requirement (``[project] dependencies``, every ``optional-dependencies`` extra, as
    lerobot's ``transformers-dep = ["transformers>=5.4.0,<5.6.0"]``, ``[dependency-groups]``,
    Poetry's tables); other files, and a pyproject TOML cannot read, line by line. A file
    the dependency front end refuses for its length (npu_migrate.pipeline.limits.MAX_DEPENDENCY_LINES) is
    not read here either: a million torch lines cost a second each abspath and TOML parse."""
    from npu_migrate.pipeline.limits import MAX_DEPENDENCY_LINES, dependency_lines

    if dependency_lines(data) > MAX_DEPENDENCY_LINES:
        return []
    if os.path.basename(path) == "pyproject.toml":
        from npu_migrate.pipeline.requirements import requirement_strings

        found = requirement_strings(data)
        if found is not None:
            return [spec for found_name, spec in found if found_name == name]
    return [m.group(1).decode("ascii", "replace").replace(" ", "").replace("\t", "").strip(",")
            for m in pattern.finditer(data)]


@dataclass(frozen=True)
class ProjectFacts:
    #: Some file of the project already calls ``<something>.set_epoch(...)``.
    calls_set_epoch: bool = False
    #: Some file of the project builds an ``nn.DataParallel`` (NPU801 then makes
    #: ``isinstance(m, nn.DataParallel)`` checks in every file accept DDP too).
    constructs_data_parallel: bool = False
    #: Module files (see :func:`module_file`) of the project that are CUDA-only code.
    cuda_only_files: frozenset[str] = frozenset()
    #: Dotted names that, in this project, can only mean one of those modules.
    cuda_only_modules: frozenset[str] = frozenset()
    #: The version specifier of timm in the project's dependency files (``==0.3.2``),
    #: "" when none names one.
    timm_specifier: str = ""
    #: The transformers version specifiers of the project's dependency files, ``;``-separated
    #: in path order (``>=4.53.3;==5.15``), "" when none names a version.
    transformers_specifier: str = ""
    #: The same for torch: NPU301 keeps to APIs every allowed torch has (``torch.amp.GradScaler``
    #: is 2.3's, ``torch.amp.custom_fwd`` 2.4's).
    torch_specifier: str = ""
    #: ``(absolute path, digest)`` of the modules that may define the project's own test
    #: skip marks (:func:`may_define_skip_marks`); the Python front end decides which of
    #: their marks stay CUDA tests (:mod:`npu_migrate.python.skip_marks`).
    skip_mark_modules: tuple[tuple[str, str], ...] = ()
    #: Some Python file of the project registers its own flash-attention class and
    #: either has no "sdpa" entry beside it or replaces transformers' FA2 class.
    custom_flash_attention: bool = False
    #: Files that import ``npu_runtime`` before this run (see :data:`IMPORTS_RUNTIME`).
    runtime_importers: frozenset[str] = frozenset()
    #: ``npu-runtime==X`` when, after this run, some file imports npu_runtime and the
    #: runtime is not vendored: the dependency rules (NPU854, NPU862) declare it. Set by
    #: the runner between its two passes (:mod:`npu_migrate.pipeline.declared`), never by the scan.
    runtime_requirement: str | None = None
    #: Set with :attr:`runtime_requirement`: every file that imports npu_runtime is a
    #: script of a project that has packages (no package module imports it), so the
    #: package's install requirements (``install_requires``, ``[project] dependencies``)
    #: do not get it: ``pip install <library>`` must not need it (NPU854, NPU862). Also set
    #: where every import of npu_runtime after this run is NPU701's guarded one.
    runtime_only_in_scripts: bool = False
    #: Absolute paths or globs of the entry points the user named (``--entry``,
    #: ``entry-points``); see :mod:`npu_migrate.pipeline.entry_points`.
    entry_points: tuple[str, ...] = ()
    #: Directories (absolute) of the run that hold an ``__init__.py``: packages, whose
    #: modules are library code (:mod:`npu_migrate.pipeline.entry_points`).
    package_dirs: frozenset[str] = frozenset()
    #: Python files (absolute) of the run that another file of the run imports
    #: (``from engine import train_one_epoch`` in ``main.py`` names ``engine.py`` beside
    #: it): library code too (:mod:`npu_migrate.pipeline.entry_points`).
    imported_files: frozenset[str] = frozenset()
    #: Python files (absolute) of the run that import a file of the run that trains
    #: (ConvNeXt's ``main.py``, whose loop is in ``engine.py``): NPU701's entry points
    #: when they have a ``__main__`` block (inside the block when they are imported
    #: themselves, as DeiT's and DETR's ``main.py``).
    imports_training: frozenset[str] = frozenset()
    #: Absolute module paths of the run without ``.py`` (``/repo/kernels/ops``) and the
    #: directories holding its Python files, up to the run's common root: what a
    #: top-level import such as ``kernels.window_process`` can mean inside the project
    #: (Swin-Transformer's own ``kernels/`` namespace package is not the Hub ``kernels``).
    local_modules: frozenset[str] = frozenset()
    #: Dependency files (absolute) named for the NPU that list torch (``requirements-npu.txt``):
    #: the project's Ascend install, where torch-npu goes (NPU850), not its other files.
    ascend_torch_files: frozenset[str] = frozenset()
    #: ``(file, imported file, package)``: Python files (absolute) of the run that cannot be
    #: imported on Ascend because a module-level import of a project module leads, through
    #: module-level imports only, to one of a package with no Ascend build
    #: (:data:`npu_migrate.tables.packages.NO_ASCEND_IMPORT`): LongLoRA's scripts import
    #: ``llama_attn_replace``, which imports flash-attn (held-out round 15).
    unimportable_via: tuple[tuple[str, str, str], ...] = ()
    #: Python files (absolute) of the run that themselves import, at module level, a package
    #: with no Ascend build or JIT-build CUDA sources: where the chains of
    #: :attr:`unimportable_via` end (:meth:`module_cannot_import`).
    no_ascend_files: frozenset[str] = frozenset()
    #: folders (absolute) holding a module that imports NVIDIA Triton Inference Server's
    #: ``triton_python_backend_utils`` at module level: a Python-backend model's version
    #: folder (``model_repo/scoring/1/``), whose other modules are that model's helpers
    #: (wenet's CUDA-decoder ``frame_reducer.py``, held-out round 24)
    triton_server_dirs: frozenset[str] = frozenset()
    #: module names the project builds only as ``CUDAExtension`` (Swin-Transformer's
    #: ``kernels/window_process/setup.py`` builds ``swin_window_process`` from ``.cu``
    #: sources with nvcc): no Ascend build exists, so a module-level import of one stops
    #: the importing module as a package in NO_ASCEND_IMPORT does (held-out round 20)
    cuda_extensions: frozenset[str] = frozenset()
    #: the libraries among tensordict and PyG that some module of the run imports: their
    #: containers have their own ``.cuda()`` and no ``.npu()``, and reach code far from
    #: where they are built (verl's ``data.batch = data.batch.cuda()`` on a ``TensorDict``
    #: held by its ``DataProto``, held-out round 20)
    container_libraries: frozenset[str] = frozenset()
    #: some dependency file pins megatron-core below 0.6, the oldest Megatron core a MindSpeed
    #: branch covers (rules/cluster/_mindspeed.py): its parallel state and CUDA RNG tracker
    #: (`tensor_parallel.model_parallel_cuda_manual_seed`) have no Ascend path, so a module
    #: that imports `megatron` at module level cannot run there (CoLLiE pins 0.2.0, round 22)
    megatron_unported: bool = False
    #: ``(file, patcher)``: Python files (absolute) of the run that import, at any depth and
    #: through any import of the run's own modules and packages, the file ``patcher`` that
    #: imports ``torch_npu.contrib.transfer_to_npu``: on Ascend torch_npu maps their CUDA
    #: calls, device strings and NCCL backend at run time (Open-Sora-Plan's ``npu_config``,
    #: held-out round 15), so the rewrites it covers serve nothing there.
    patched_via: tuple[tuple[str, str], ...] = ()
    #: Python files (absolute) that name transformers' ``TrainingArguments`` or
    #: ``HfArgumentParser``: the scripts whose command lines transformers parses (NPU935
    #: removes ``--tf32 True`` only from launches of those, or of scripts it cannot see).
    hf_argument_files: frozenset[str] = frozenset()
    #: Names that a Python file of the project defines (a function at column 0, an
    #: attribute of ``self``) and that are written exactly once
    #: in all of the project's files (code, notebooks, configuration, launchers, docs): where
    #: they are defined. Nothing calls or reads them, so nothing their values hold reaches
    #: torch (:mod:`npu_migrate.python.unread`).
    unread_names: frozenset[str] = frozenset()
    #: The lowest Python the project says it installs (``"3.8"``): an exact ``requires-python`` /
    #: ``python_requires`` pin (a range such as ``>=3.8`` admits 3.10), a conda environment's ``python=3.8``, a Dockerfile's
    #: ``FROM python:3.8``, a doc's ``conda create ... python=3.8``; "" when none says.
    #: npu-runtime needs 3.10, so below that it is not declared (npu_migrate/pipeline/declared.py).
    python_floor: str = ""
    #: A ``cog.yaml`` of the project builds its image for NVIDIA GPUs (``build: gpu: true``):
    #: its Cog predictors (``from cog import BasePredictor``) are an NVIDIA deployment.
    cog_gpu: bool = False
    #: Classes of the project that define their own ``cuda()`` method and no ``npu()``
    #: (ReaLHF's ``SequenceSample``, a batch that moves its tensors), and the functions
    #: whose return annotation names one of them (``-> List[SequenceSample]``): a
    #: ``.cuda()`` call on such an object stays, since torch_npu adds ``.npu()`` to
    #: tensors and modules only (held-out round 23). Its body is migrated as usual.
    own_cuda_classes: frozenset[str] = frozenset()
    own_cuda_returns: frozenset[str] = frozenset()
    #: Python files (absolute) that cannot reach a device: no ``torch`` in them, nothing
    #: that starts a process, and every import the standard library's or such a file of the
    #: project's (VILA's answer-merging and scoring scripts, held-out round 23). What a
    #: launcher sets for them (``CUDA_VISIBLE_DEVICES=0 python eval_pope.py``) reaches no
    #: torch (:mod:`npu_migrate.shell.targets`).
    quiet_files: frozenset[str] = frozenset()
    #: the package of another PrivateUse1 backend the project imports (``torch_directml``):
    #: the guard's CPU path renames that slot to "npu" only where it is not installed
    privateuse1_package: str = ""
    #: Module-level functions of the project that pick a device by CUDA compute capability
    #: (they call ``torch.cuda.get_device_capability`` and build a ``"cuda"`` device: RVC's
    #: ``get_device_dtype_sm``). NPU011 keeps their capability test, so on Ascend they answer
    #: the CPU; a test that hands them a device, or compares what they return with "cuda",
    #: stays CUDA's with them (:mod:`npu_migrate.python.cuda_only`, held-out round 23).
    capability_choosers: frozenset[str] = frozenset()
    #: Module-level functions of the project that read NVIDIA's management tools (GPUtil,
    #: pynvml, gpustat, nvitop: NVML or nvidia-smi): a device test in front of a call of one
    #: keeps it from Ascend, where they find no GPU (h2o-llmstudio's ``get_gpu_usage``
    #: divided by an empty GPUtil list, held-out round 23).
    nvidia_tool_functions: frozenset[str] = frozenset()

    @classmethod
    def scan(cls, sources: Iterable[bytes | tuple[str, bytes]]) -> ProjectFacts:
        """Facts from every source, given as bytes or as ``(path, bytes)`` (all of
        ``sources`` is consumed, even once a fact is known)."""
        calls_set_epoch = constructs_data_parallel = False
        cuda_only: set[str] = set()
        packages: dict[str, list[str]] = {}  # package module file -> its relative imports
        files: list[str] = []
        timm = ""
        transformers: dict[str, str] = {}
        torch_pins: dict[str, str] = {}
        mark_modules: list[tuple[str, str]] = []
        custom_flash = False
        importers: set[str] = set()
        packages_seen: set[str] = set()
        imports: dict[str, set[str]] = {}  # absolute .py path -> the dotted names it imports
        top_imports: dict[str, set[str]] = {}  # the same, of its imports at column 0 (module level)
        training: set[str] = set()
        ascend_torch: set[str] = set()
        hf_arguments: set[str] = set()
        builds: list[str] = []  # files that JIT-build CUDA sources at module level
        extensions: dict[str, set[str]] = {"cuda": set(), "other": set()}  # setup-built extension modules
        megatron_pins: list[str] = []
        pythons: set[str] = set()  # the Python versions the project says it installs
        own_cuda: set[str] = set()  # classes with their own cuda() and no npu()
        quiet: set[str] = set()  # files without torch or process starts (before their imports are read)
        privateuse1 = ""
        choosers: set[str] = set()
        tools: set[str] = set()
        returns: dict[str, set[str]] = {}  # function name -> its return annotations
        cog_gpu = False
        relative: dict[str, set[str]] = {}  # absolute .py path -> the files its relative imports may name
        top_relative: dict[str, set[str]] = {}  # the same, of its relative imports at column 0
        scripts: list[str] = []  # files with a `__main__` block: run, not only imported
        words: collections.Counter[bytes] = collections.Counter()
        defined: set[bytes] = set()
        for source in sources:
            path, data = source if isinstance(source, tuple) else (None, source)
            if len(data) <= _COUNTED_BYTES:
                words.update(_WORD.findall(data))
            if path is not None and os.path.basename(path) == "cog.yaml" and _COG_GPU.search(data):
                cog_gpu = True
            if (path is not None and b"ython" in data and not path.endswith(".ipynb")
                    and (not path.endswith(".py") or os.path.basename(path) == "setup.py")):
                installs = _INSTALLS_PROJECT.search(data) is not None
                for match in _PYTHON_VERSION.finditer(data):
                    if match.group(3) is None or installs:  # a doc's environment counts where it installs the project
                        pythons.add(next(g for g in match.groups() if g).decode("ascii"))
            if (path is not None and b"torch" in data and _DEPENDENCY_FILE.fullmatch(os.path.basename(path))
                    and _ASCEND_NAME.search(os.path.basename(path))):
                ascend_torch.add(os.path.abspath(path))
            # Each regular expression runs only where the word it cannot match without
            # is in the file (``bytes in`` is a fast scan, ``re`` is not): same facts.
            if path is not None and not timm and _DEPENDENCY_FILE.fullmatch(os.path.basename(path)):
                found = _TIMM_REQUIREMENT.search(data)
                timm = found.group(1).decode("ascii", "replace").replace(" ", "").strip(",\t") if found else ""
            if (path is not None and b"transformers" in data
                    and _DEPENDENCY_FILE.fullmatch(os.path.basename(path))):
                for number, spec in enumerate(_transformers_specifiers(path, data)):
                    transformers[os.path.abspath(path) + f"#{number}"] = spec
            elif path is not None and path.endswith(".sh") and b"transformers" in data and b"install" in data:
                # HALOs' install.sh: `pip install transformers==4.51.3`
                for number, spec in enumerate(_pip_install_specifiers(data, b"transformers")):
                    transformers[os.path.abspath(path) + f"#{number}"] = spec
            if (path is not None and b"torch" in data
                    and _DEPENDENCY_FILE.fullmatch(os.path.basename(path))):
                for number, spec in enumerate(_torch_specifiers(path, data)):
                    torch_pins[os.path.abspath(path) + f"#{number}"] = spec
            elif path is not None and b"torch" in data and b"install" in data and _installs_environment(path):
                # ReaLHF's Dockerfile and CI workflow: `pip3 install torch==2.3.1` (held-out round 23:
                # torch.amp.custom_fwd, torch 2.4's, broke every import of its model there)
                for number, spec in enumerate(_pip_install_specifiers(data, b"torch")):
                    torch_pins[os.path.abspath(path) + f"#{number}"] = spec
            if (path is not None and b"megatron" in data
                    and _DEPENDENCY_FILE.fullmatch(os.path.basename(path))):
                megatron_pins += _specifiers(path, data, "megatron-core", _MEGATRON_REQUIREMENT)
            if path is not None and path.endswith(".py") and b"npu_runtime" in data and IMPORTS_RUNTIME.search(data):
                importers.add(path)
            if path is not None and os.path.basename(path) == "__init__.py":
                packages_seen.add(os.path.dirname(os.path.abspath(path)))
            calls_set_epoch = calls_set_epoch or (b".set_epoch" in data and _calls_set_epoch(data))
            constructs_data_parallel = constructs_data_parallel or (
                b"DataParallel" in data and _DATA_PARALLEL_CALL.search(data) is not None)
            if path is None or not path.endswith(".py"):
                continue
            if not custom_flash and b"flash_attention_2" in data:
                custom_flash = any(b"sdpa" not in m.group() or m.group().startswith(b"[")
                                   for m in _FLASH_REGISTRY.finditer(data))
            if b"TrainingArguments" in data or b"HfArgumentParser" in data:
                hf_arguments.add(os.path.abspath(path))
            imports[os.path.abspath(path)] = _imported_names(data)
            if b"torch" not in data and _STARTS_PROCESSES.search(data) is None:
                quiet.add(os.path.abspath(path))
            if b"from ." in data or b"from\t." in data:
                relative[os.path.abspath(path)], top_relative[os.path.abspath(path)] = _relative_files(
                    os.path.abspath(path), data)
            for match in _DEFINED_NAME.finditer(data):
                defined.add(match.group(match.lastindex))
            top_imports[os.path.abspath(path)] = _imported_names(data, top_level=True)
            if builds_cuda_at_import(data):
                builds.append(os.path.abspath(path))
            if b"Extension" in data:
                for match in _EXTENSION.finditer(data):
                    extensions["cuda" if match.group(1) == b"CUDA" else "other"].add(match.group(2).decode("ascii"))
            if b"__main__" in data:
                scripts.append(os.path.abspath(path))
            if not privateuse1 and b"torch_directml" in data and _IMPORTS_DIRECTML.search(data):
                privateuse1 = "torch_directml"
            if b"get_device_capability" in data and b"def " in data:
                choosers |= _capability_choosers(data)
            if b"def " in data and _NVIDIA_TOOL_WORD.search(data):
                tools |= _functions_naming(data, _NVIDIA_TOOLS)
            if b"def cuda(" in data:
                own_cuda |= _classes_with_own_cuda(data)
            if b"->" in data:
                for match in _RETURN_ANNOTATION.finditer(data):
                    returns.setdefault(match.group(1).decode("ascii", "replace"), set()).add(
                        match.group(2).decode("utf-8", "replace"))
            if may_define_skip_marks(path, data):
                mark_modules.append((os.path.abspath(path), hashlib.sha1(data).hexdigest()[:16]))
            if any(word in data for word in _TRAINS_WORDS) and TRAINS.search(data):
                training.add(os.path.abspath(path))
            file = module_file(path)
            files.append(file)
            if any(word in data for word in _CUDA_ONLY_WORDS) and _CUDA_ONLY_MODULE.search(data):
                cuda_only.add(file)
            elif os.path.basename(path) == "__init__.py":
                packages[file] = [m.decode() for m in _RELATIVE_IMPORT.findall(data)]
        changed = True
        while changed:  # a package that re-exports a CUDA-only module is one too
            changed = False
            for package, imported in packages.items():
                if package not in cuda_only and any(os.path.join(package, m) in cuda_only for m in imported):
                    cuda_only.add(package)
                    changed = True
        # (an extension also built for the CPU under the same name, `CppExtension`, imports there)
        cuda_extensions = frozenset(extensions["cuda"] - extensions["other"])
        megatron_unported = bool(megatron_pins) and all(_below_mindspeed(spec) for spec in megatron_pins)
        blocking = _project_blockers(cuda_extensions, megatron_unported)
        edges = _import_edges(imports)
        local = _local_modules(files)
        by_name: dict[str, bool] = {}
        for file in files:
            for name in _suffixes(file):
                by_name[name] = by_name.get(name, True) and file in cuda_only
        return cls(
            calls_set_epoch=calls_set_epoch,
            constructs_data_parallel=constructs_data_parallel,
            cuda_only_files=frozenset(cuda_only),
            cuda_only_modules=frozenset(name for name, only in by_name.items() if only),
            timm_specifier=timm,
            transformers_specifier=";".join(transformers[k] for k in sorted(transformers)),
            torch_specifier=";".join(torch_pins[k] for k in sorted(torch_pins)),
            skip_mark_modules=tuple(sorted(mark_modules)),
            custom_flash_attention=custom_flash,
            runtime_importers=frozenset(importers),
            package_dirs=frozenset(packages_seen),
            imported_files=frozenset(found for found, _ in edges),
            imports_training=frozenset(importer for found, importer in edges if found in training),
            local_modules=local,
            ascend_torch_files=frozenset(ascend_torch),
            unimportable_via=_unimportable(top_imports, builds, imports, frozenset(scripts), top_relative, relative,
                                           blocking),
            no_ascend_files=frozenset(path for path, names in top_imports.items()
                                      if _blocking_package(names, blocking))
            | frozenset(builds),
            triton_server_dirs=frozenset(os.path.dirname(path) for path, names in top_imports.items()
                                         if _blocking_package(names, ()) is not None
                                         and any(n.split(".")[0] == "triton_python_backend_utils" for n in names)),
            cuda_extensions=cuda_extensions,
            megatron_unported=megatron_unported,
            container_libraries=frozenset(name.split(".")[0] for names in imports.values() for name in names
                                          if name.split(".")[0] in _CONTAINER_LIBRARIES),
            patched_via=_patched(imports),
            hf_argument_files=frozenset(hf_arguments),
            # a single Python file is not a project: what calls its functions is elsewhere
            unread_names=frozenset(name.decode("ascii") for name in defined if words[name] == 1)
            if len(files) >= 2 else frozenset(),
            cog_gpu=cog_gpu,
            python_floor=min(pythons, key=version, default=""),
            quiet_files=_quiet(quiet, imports, edges, local),
            privateuse1_package=privateuse1,
            capability_choosers=frozenset(choosers),
            nvidia_tool_functions=frozenset(tools),
            own_cuda_classes=frozenset(own_cuda),
            own_cuda_returns=_returning(returns, own_cuda),
        )

    def blocked_import(self, path: str) -> tuple[str, str] | None:
        """``(imported file, package)`` when the Python file ``path`` cannot be imported on
        Ascend through its module-level imports of the run's modules (:attr:`unimportable_via`)."""
        return self._blocked.get(os.path.abspath(path))

    def module_cannot_import(self, importer: str, dotted: str, level: int = 0) -> str | None:
        """The project file ``import dotted`` (``level`` dots of a relative import) names from
        the Python file ``importer``, when that file cannot be imported on Ascend: it imports a
        package with no Ascend build or builds CUDA sources at module level, or its module-level
        imports lead to one (:meth:`blocked_import`; not a module only imported by such
        modules, which imports fine). None when ``dotted`` is no module of the run, or imports."""
        directory = os.path.dirname(os.path.abspath(importer))
        if level:
            for _ in range(level - 1):
                directory = os.path.dirname(directory)
            bases = [directory]
        else:
            bases = []
            while True:
                bases.append(directory)
                parent = os.path.dirname(directory)
                if parent == directory:
                    break
                directory = parent
        parts = dotted.split(".") if dotted else []
        for base in bases:
            stem = os.path.join(base, *parts)
            if stem not in self.local_modules:
                continue
            for file in (stem + ".py", os.path.join(stem, "__init__.py")):
                chain = self.blocked_import(file)
                if file in self.no_ascend_files or (chain is not None and chain[1] != ONLY_FROM_BLOCKED):
                    return file
            return None  # the module the import finds first (the script's directory comes first)
        return None

    def patched_by(self, path: str) -> str | None:
        """The file of the run that imports torch_npu's ``transfer_to_npu`` and that the
        Python file ``path`` imports (or is), if any (:attr:`patched_via`)."""
        return self._patched.get(os.path.abspath(path))

    # lookups asked once per migrated file: built once, not a scan of the tuples per file
    @functools.cached_property
    def _blocked(self) -> dict[str, tuple[str, str]]:
        return {file: (step, package) for file, step, package in self.unimportable_via}

    @functools.cached_property
    def _patched(self) -> dict[str, str]:
        return dict(self.patched_via)

    @functools.cached_property
    def module_tails(self) -> dict[str, tuple[str, ...]]:
        """Every ``/``-separated tail of every module path of the project (``train``,
        ``medusa/train``...) -> the ``.py`` files it may name (a launcher's script:
        :mod:`npu_migrate.shell.targets`)."""
        tails: dict[str, list[str]] = {}
        for module in self.local_modules:
            parts = [p for p in module.split(os.sep) if p]
            for first in range(len(parts) - 1, -1, -1):
                tails.setdefault("/".join(parts[first:]), []).append(module + ".py")
        return {tail: tuple(files) for tail, files in tails.items()}

    def is_cuda_only_file(self, file: str) -> bool:
        """``file`` (an absolute module path without ``.py``) is CUDA-only code."""
        return file in self.cuda_only_files

    @property
    def blocking_modules(self) -> frozenset[str]:
        """The project's own reasons a module cannot import on Ascend, beyond
        NO_ASCEND_IMPORT: its CUDA-only extensions, and ``megatron`` when
        :attr:`megatron_unported`."""
        return _project_blockers(self.cuda_extensions, self.megatron_unported)

    def is_cuda_only_module(self, dotted: str) -> bool:
        return dotted in self.cuda_only_modules

    def is_project_module(self, importer: str, dotted: str) -> bool:
        """The top-level package of ``dotted`` is a module or directory of the run
        beside ``importer`` or in a directory above it (the script's directory and the
        repository root are where Python looks first)."""
        top = dotted.split(".")[0]
        directory = os.path.dirname(os.path.abspath(importer))
        while True:
            if os.path.join(directory, top) in self.local_modules:
                return True
            parent = os.path.dirname(directory)
            if parent == directory:
                return False
            directory = parent

    def key(self) -> str:
        names = (sorted(self.cuda_only_files | self.cuda_only_modules) + sorted(f"pkg:{d}" for d in self.package_dirs)
                 + sorted(f"imported:{f}" for f in self.imported_files)
                 + sorted(f"imports-training:{f}" for f in self.imports_training)
                 + sorted(f"local:{f}" for f in _relative(self.local_modules))
                 + sorted(f"ascend:{f}" for f in _relative(self.ascend_torch_files))
                 + sorted(f"blocked:{f}" for f in _relative(frozenset(f for f, _, _ in self.unimportable_via)))
                 + sorted(f"no-ascend:{f}" for f in _relative(self.no_ascend_files))
                 + sorted(f"triton-server:{f}" for f in _relative(self.triton_server_dirs))
                 + sorted(f"cuda-extension:{name}" for name in self.cuda_extensions)
                 + sorted(f"containers:{name}" for name in self.container_libraries)
                 + (["megatron-unported"] if self.megatron_unported else [])
                 + sorted(f"patched:{f}" for f in _relative(frozenset(f for f, _ in self.patched_via)))
                 + sorted(f"hf-arguments:{f}" for f in _relative(self.hf_argument_files))
                 + sorted(f"unread:{name}" for name in self.unread_names)
                 + sorted(f"own-cuda:{name}" for name in self.own_cuda_classes)
                 + sorted(f"quiet:{f}" for f in _relative(self.quiet_files))
                 + ([f"privateuse1:{self.privateuse1_package}"] if self.privateuse1_package else [])
                 + sorted(f"chooser:{name}" for name in self.capability_choosers)
                 + sorted(f"nvidia-tool:{name}" for name in self.nvidia_tool_functions)
                 + sorted(f"own-cuda-returns:{name}" for name in self.own_cuda_returns)
                 + [f"skip:{os.path.basename(path)}:{digest}" for path, digest in self.skip_mark_modules])
        digest = hashlib.sha1("\n".join(names).encode()).hexdigest()[:12] if names else "-"
        return (f"set_epoch={int(self.calls_set_epoch)},data_parallel={int(self.constructs_data_parallel)},"
                f"cuda_only={digest},timm={self.timm_specifier or '-'},"
                f"transformers={self.transformers_specifier or '-'},torch={self.torch_specifier or '-'},flash={int(self.custom_flash_attention)},"
                f"runtime={self.runtime_requirement or '-'}{'/scripts' if self.runtime_only_in_scripts else ''},"
                f"python={self.python_floor or '-'},cog_gpu={int(self.cog_gpu)},"
                f"entries={hashlib.sha1(chr(10).join(self.entry_points).encode()).hexdigest()[:12]}")


_IMPORTS_DIRECTML = re.compile(rb"^[ \t]*(?:import|from)[ \t]+torch_directml\b", re.MULTILINE)
#: what starts another program or process (which inherits a launcher's environment)
_STARTS_PROCESSES = re.compile(rb"subprocess|os\.system|os\.exec|os\.spawn|os\.popen|Popen|runpy|multiprocessing|"
                               rb"\bexec\(|importlib|__import__")


#: libraries that never import torch (scoring and data-munging scripts use them)
_TORCH_FREE_LIBRARIES = frozenset({"numpy", "pandas", "tqdm", "PIL", "yaml", "requests", "matplotlib", "scipy",
                                   "sklearn", "nltk", "pycocotools", "pycocoevalcap", "shortuuid", "regex", "tabulate",
                                   "termcolor", "fire", "click", "openai", "editdistance", "jsonlines", "seaborn"})


def _quiet(candidates: set[str], imports: dict[str, set[str]], edges: set[tuple[str, str]],
           local: frozenset[str]) -> frozenset[str]:
    """:attr:`ProjectFacts.quiet_files`: the candidates whose imports are all the standard
    library's or quiet files of the project (a fixed point over the project's imports)."""
    if not candidates:
        return frozenset()
    names = {os.path.basename(m) for m in local}
    quiet = {f for f in candidates
             if all(n.split(".")[0] in sys.stdlib_module_names or n.split(".")[0] in names
                    or n.split(".")[0] in _TORCH_FREE_LIBRARIES or not n for n in imports.get(f, ()))}
    changed = True
    while changed:
        changed = False
        for imported, importer in edges:
            if importer in quiet and imported not in quiet:
                quiet.discard(importer)
                changed = True
    return frozenset(quiet)


#: ``def name(...) -> annotation:`` (parameters over several lines too)
_RETURN_ANNOTATION = re.compile(rb"\bdef\s+(\w+)\s*\([^)]*\)\s*->\s*([^:\n]{1,200}):")


#: NVIDIA's management tools, as modules a function names
_NVIDIA_TOOLS = frozenset({"GPUtil", "pynvml", "py3nvml", "gpustat", "nvitop", "nvidia_smi"})
_NVIDIA_TOOL_WORD = re.compile(rb"\b(?:GPUtil|pynvml|py3nvml|gpustat|nvitop|nvidia_smi)\b")


def _functions_naming(data: bytes, modules: frozenset[str]) -> set[str]:
    """Module-level functions of one source that name one of ``modules`` (``GPUtil.getGPUs()``)."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return set()
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(isinstance(n, ast.Name) and n.id in modules for n in ast.walk(node))}


def _capability_choosers(data: bytes) -> set[str]:
    """Module-level functions of one source that call ``get_device_capability`` and write a
    ``"cuda"`` device string (:attr:`ProjectFacts.capability_choosers`)."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return set()
    found = set()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        probes = cuda = False
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute) and inner.attr == "get_device_capability":
                probes = True
            elif isinstance(inner, ast.Constant) and isinstance(inner.value, str) and inner.value.startswith("cuda"):
                cuda = True
        if probes and cuda:
            found.add(node.name)
    return found


def _classes_with_own_cuda(data: bytes) -> set[str]:
    """Classes of one Python source that define ``cuda`` and not ``npu`` (ast: only files
    that hold ``def cuda(``); nn.Module subclasses overriding it are torch's already."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return set()
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        methods = {m.name for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
        if "cuda" in methods and "npu" not in methods and not bases & {"Module", "Tensor"}:
            found.add(node.name)
    return found


def _returning(returns: dict[str, set[str]], classes: set[str]) -> frozenset[str]:
    if not classes:
        return frozenset()
    named = re.compile(r"\b(?:" + "|".join(re.escape(c) for c in sorted(classes)) + r")\b")
    return frozenset(name for name, annotations in returns.items() if any(named.search(a) for a in annotations))


def version(text: str) -> tuple[int, ...]:
    """``"3.8"`` as ``(3, 8)``, comparable (:attr:`ProjectFacts.python_floor`)."""
    return tuple(int(part) for part in text.split("."))


def _calls_set_epoch(data: bytes) -> bool:
    """The file calls ``.set_epoch(`` on something other than a DistributedSampler it
    builds itself (``sampler = DistributedSampler(...)``, ``self.sampler = ...
    DistributedSampler(...) if ... else None``, then ``sampler.set_epoch(epoch)``). Only
    such a call hints that another file's sampler is taken care of: one on the file's own
    sampler says nothing of theirs, and counting it made a second run lose another file's
    NPU502 finding once the first run had written a ``set_epoch`` (NPU501/502/510/511; the
    "same findings" property, in CI)."""
    for found in _SET_EPOCH.finditer(data):
        start = data.rfind(b"\n", 0, found.start()) + 1
        receiver = re.fullmatch(rb"\s*([A-Za-z_][\w.]*)", data[start : found.start()])
        if receiver is None:
            return True
        built = rb"^[ \t]*" + re.escape(receiver.group(1)) + rb"[ \t]*(?::[^=\n]*)?=[^=\n][^\n]*\bDistributedSampler\("
        if re.search(built, data, re.MULTILINE) is None:
            return True
    return False


def _relative(paths: frozenset[str]) -> list[str]:
    """``paths`` below their common directory: a key that does not change when the
    project moves (a clone elsewhere finds the same cache entries, and checks them)."""
    if not paths:
        return []
    root = os.path.commonpath([os.path.dirname(p) for p in paths])
    return [os.path.relpath(p, root) for p in paths]


def _local_modules(files: list[str]) -> frozenset[str]:
    """Module paths (see :func:`module_file`) and the directories above them, up to the
    files' common root."""
    if not files:
        return frozenset()
    root = os.path.commonpath([os.path.dirname(f) for f in files])
    found: set[str] = set()
    for file in files:
        path = file
        while path not in found and len(path) > len(root):
            found.add(path)
            path = os.path.dirname(path)
    return frozenset(found)


def _imported_names(data: bytes, top_level: bool = False) -> set[str]:
    """The dotted names a file imports (``from a import b, c`` gives ``a``, ``a.b``, ``a.c``).
    Line by line, and only lines with ``import`` in them: :data:`_IMPORT` matches at a
    line's start and never across a line end, and ``re`` alone would try every position
    of the file. ``top_level``: only the imports written at column 0, which run whenever
    the module is imported (not in a ``try``, an ``if`` or a function)."""
    names: set[str] = set()
    lines = data.split(b"\n")
    if top_level and b"__main__" in data:
        lines += _main_block_imports(lines)
    for line in lines:
        match = _IMPORT.match(line) if b"import" in line and not (top_level and line[:1] in (b" ", b"\t")) else None
        if match is None:
            continue
        plain, module, members = match.groups()
        if plain is not None:
            for part in plain.decode("ascii", "replace").split(","):
                words = part.split()
                if words:
                    names.add(words[0])
        else:
            base = module.decode("ascii", "replace")
            names.add(base)
            for part in members.decode("ascii", "replace").split(","):
                words = part.split()
                if words and words[0].isidentifier():
                    names.add(f"{base}.{words[0]}")
    return names


_MAIN_GUARD = re.compile(rb"""if[ \t]+__name__[ \t]*==[ \t]*['"]__main__['"][ \t]*:[ \t]*(?:#.*)?""")


def _main_block_imports(lines: list[bytes]) -> list[bytes]:
    """The import lines of a column-0 ``if __name__ == "__main__":`` block written at its
    body's own indentation (not deeper, where they may not run), unindented: a script's
    imports that run whenever it runs (RWKV-v4's ``train.py`` imports its trainer there)."""
    found: list[bytes] = []
    inside = False
    indent = b""
    for line in lines:
        if not inside:
            inside = _MAIN_GUARD.fullmatch(line.rstrip(b"\r")) is not None
            indent = b""
            continue
        if not line.strip() or line.lstrip().startswith(b"#"):
            continue
        if line[:1] not in (b" ", b"\t"):
            inside = _MAIN_GUARD.fullmatch(line.rstrip(b"\r")) is not None
            continue
        if not indent:
            indent = line[: len(line) - len(line.lstrip(b" \t"))]
        if line.startswith(indent) and line[len(indent):len(indent) + 1] not in (b" ", b"\t") and b"import" in line:
            found.append(line[len(indent):])
    return found


def _blocking_package(names: Iterable[str], extensions: Collection[str] = ()) -> str | None:
    for name in sorted(names):
        if any(name == package or name.startswith(package + ".") for package in (*NO_ASCEND_IMPORT, *extensions)):
            return name
    return None


#: ``megatron-core==0.2.0`` / ``megatron_core>=0.4,<0.5`` in a dependency file
_MEGATRON_REQUIREMENT = re.compile(
    rb"""(?:^|(?<=[\[,(]))[ \t\-"']*megatron[-_]core(?![\w-])[ \t]*((?:[<>=!~]=?=?[ \t]*[\w.*+!-]+[ \t]*,?[ \t]*)+)""",
    re.MULTILINE)
#: Megatron core releases a MindSpeed branch covers, the oldest first (rules/cluster/_mindspeed.py)
_MINDSPEED_MEGATRON = ("0.6.0", "0.7.0", "0.8.0", "0.9.0", "0.10.0", "0.12.1", "0.15.3", "1.0.0")


def _project_blockers(extensions: frozenset[str], megatron_unported: bool) -> frozenset[str]:
    return extensions | {"megatron"} if megatron_unported else extensions


def _below_mindspeed(spec: str) -> bool:
    """The specifier admits no Megatron core a MindSpeed branch covers (``==0.2.0``)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        allowed = SpecifierSet(spec)
    except InvalidSpecifier:
        return False
    return not any(allowed.contains(v, prereleases=True) for v in _MINDSPEED_MEGATRON)


#: libraries whose containers define ``.cuda()`` and no ``.npu()`` (see rules/device/npu103)
_CONTAINER_LIBRARIES = frozenset({"tensordict", "torch_geometric"})
#: ``CUDAExtension("name", ...)`` / ``CppExtension(name="pkg._C", ...)`` in a build script
_EXTENSION = re.compile(rb"""\b(CUDA|Cpp|Sycl)Extension\(\s*(?:name\s*=\s*)?['"]([A-Za-z_][\w.]*)['"]""")


#: what a chain leads to when its last module JIT-builds CUDA sources at import
JIT_BUILD_STEP = "a module that JIT-builds CUDA sources at import (nvcc)"
#: ``name = load(`` / ``cpp_extension.load_inline(`` at a line's start: a candidate build
_JIT_BUILD = re.compile(rb"^[ \t]*(?:[A-Za-z_][\w.]*[ \t]*=[ \t]*)?(?:[\w.]*\.)?load(?:_inline)?[ \t]*\(", re.MULTILINE)
_CUDA_SOURCE = re.compile(rb"""\.cuh?['"]|cuda_sources|with_cuda[ \t]*=[ \t]*True""")


def builds_cuda_at_import(data: bytes) -> bool:
    """The file JIT-builds CUDA sources at module level, on every import
    (:func:`npu_migrate.pipeline.cuda_builds.jit_build_at_import`, from the syntax tree; only
    files the text test finds a candidate are parsed)."""
    if not (b"cpp_extension" in data and _JIT_BUILD.search(data) is not None and _CUDA_SOURCE.search(data) is not None):
        return False
    import ast

    from npu_migrate.pipeline.cuda_builds import jit_build_at_import

    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return jit_build_at_import(tree) is not None


#: what a "chain" names for a module that only modules that cannot import import
ONLY_FROM_BLOCKED = "only-imported-by-blocked"


def _relative_files(path: str, data: bytes) -> tuple[set[str], set[str]]:
    """The ``.py`` files the relative imports of ``path`` may name (``from .model import X``
    in ``pkg/__init__.py``: ``pkg/model.py``, ``pkg/model/__init__.py``, ``pkg/model/X.py``):
    those of all of them, and those of the imports at column 0."""
    found: set[str] = set()
    top: set[str] = set()
    for match in _RELATIVE_FROM.finditer(data):
        named: set[str] = set()
        dots, module, members = match.group(2).decode(), match.group(3).decode(), match.group(4).decode()
        base = os.path.dirname(path)
        for _ in range(len(dots) - 1):
            base = os.path.dirname(base)
        target = os.path.join(base, *module.split(".")) if module else base
        if module:
            named.update({target + ".py", os.path.join(target, "__init__.py")})
        for member in members.split(","):
            words = member.split()
            if words and words[0].isidentifier():
                named.add(os.path.join(target, words[0] + ".py"))
        found |= named
        if not match.group(1):
            top |= named
    return found, top


#: ``from .model import X`` / ``from ..utils import y`` (group 1: the indentation)
_RELATIVE_FROM = re.compile(rb"^([ \t]*)from[ \t]+(\.+)([\w.]*)[ \t]+import[ \t]+\(?[ \t]*([\w, \t]*)", re.MULTILINE)


def _relative_edges(relative: dict[str, set[str]] | None, files: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(imported file, importing file) for the relative imports that name a file of the run."""
    return {(target, path) for path, targets in (relative or {}).items() for target in targets
            if target in files and target != path}


def _parent_package_edges(files: dict[str, set[str]], scripts: frozenset[str],
                          top_relative: dict[str, set[str]] | None) -> set[tuple[str, str]]:
    """(a package's ``__init__.py``, a module below it): importing ``pkg.sub.mod`` runs
    ``pkg/__init__.py`` and ``pkg/sub/__init__.py`` first, so a module cannot be imported
    where a package above it cannot (EasyContext's ``easy_context/__init__.py`` imports
    ring-flash-attention, so ``easy_context.dist_flash_attn.*`` fails too: round 20). Not a
    script run by its path (``python pkg/train.py`` imports no package), unless its relative
    imports need the package (then it runs with ``-m``). Folders without an ``__init__.py``
    (namespace packages) are passed through to the packages above them."""
    initializers = {os.path.dirname(path): path for path in files if os.path.basename(path) == "__init__.py"}
    if not initializers:
        return set()
    edges: set[tuple[str, str]] = set()
    for path in files:
        if path in scripts and not (top_relative or {}).get(path):
            continue
        directory = os.path.dirname(path)
        if os.path.basename(path) == "__init__.py":
            directory = os.path.dirname(directory)
        # (through namespace folders too: `easy_context/dist_flash_attn/` has no __init__.py,
        # `easy_context/` has one)
        while directory != os.path.dirname(directory):
            if directory in initializers:
                edges.add((initializers[directory], path))
            directory = os.path.dirname(directory)
    return edges


def _unimportable(top_imports: dict[str, set[str]], builds: Iterable[str] = (),
                  all_imports: dict[str, set[str]] | None = None,
                  scripts: frozenset[str] = frozenset(), top_relative: dict[str, set[str]] | None = None,
                  relative: dict[str, set[str]] | None = None,
                  extensions: Collection[str] = ()) -> tuple[tuple[str, str, str], ...]:
    """``(file, imported file, package)`` for the files whose module-level imports of the
    run's own modules lead to a module-level import of a package with no Ascend build;
    ``imported file`` is the first step of that chain. Files that import such a package
    themselves are not listed (the Python front end sees that import in the file)."""
    blocked: dict[str, tuple[str]] = {}  # file -> (the package it imports,)
    for path, names in top_imports.items():
        package = _blocking_package(names, extensions)
        if package is not None:
            blocked[path] = (package,)
    for path in builds:
        blocked.setdefault(path, (JIT_BUILD_STEP,))
    if not blocked:
        return ()
    importers: dict[str, list[str]] = {}
    # (`import models` runs models/__init__.py, whose `from .model import ...` runs model.py)
    for imported, importer in (_import_edges(top_imports, packages=True) | _relative_edges(top_relative, top_imports)
                               | _parent_package_edges(top_imports, scripts, top_relative)):
        importers.setdefault(imported, []).append(importer)
    via: dict[str, tuple[str, str]] = {}  # file -> (the imported file, the package at the chain's end)
    pending = sorted(blocked)
    while pending:
        imported = pending.pop(0)
        package = blocked[imported][0] if imported in blocked else via[imported][1]
        for importer in sorted(importers.get(imported, ())):
            if importer not in blocked and importer not in via:
                via[importer] = (imported, package)
                pending.append(importer)
    if all_imports is not None:
        # the other way: a module that only such modules import (at any depth, in functions
        # too), and that is no script itself, runs nowhere else (RWKV's src/utils.py, only
        # imported by the train.py that imports the kernel-building model.py: round 19). A
        # package's module too (Open-Reasoner-Zero's replay buffer, moved to the NPU while the
        # actors that fill it stay CUDA's: wrong); the price is a package module someone
        # outside the project imports alone (nanotron's dataloader), reported here
        users: dict[str, set[str]] = {}
        initializers = {os.path.dirname(path): path for path in all_imports if os.path.basename(path) == "__init__.py"}
        for imported, importer in _import_edges(all_imports, packages=True) | _relative_edges(relative, all_imports):
            if imported != importer:
                users.setdefault(imported, set()).add(importer)
                # importing `pkg.sub.mod` runs pkg/sub/__init__.py too: its importer uses them
                # (verl's reward_model/megatron/__init__.py, used only through megatron_workers)
                directory = os.path.dirname(imported)
                if os.path.basename(imported) == "__init__.py":
                    directory = os.path.dirname(directory)
                while directory in initializers and initializers[directory] != importer:
                    if not importer.startswith(directory + os.sep):
                        users.setdefault(initializers[directory], set()).add(importer)
                    directory = os.path.dirname(directory)
        # (a script whose module-level relative imports need its package runs with -m, as
        # one of the package's modules: lightseq_async_attn.py's benchmark, round 20)
        candidates = {path for path in users if path not in blocked and path not in via
                      and not (path in scripts and not (top_relative or {}).get(path))}
        # the largest set whose users are all blocked or in the set: modules that import each
        # other and are used only by blocked code (a package's __init__ and its module,
        # verl's reward_model/megatron, round 20) run nowhere else either. Worklists, so a
        # project of thousands of modules costs one pass over its import edges.
        uses: dict[str, set[str]] = {}  # importer -> the candidates it imports
        for imported, importers in users.items():
            if imported in candidates:
                for importer in importers:
                    uses.setdefault(importer, set()).add(imported)
        pending = [path for path in sorted(candidates)
                   if any(user not in blocked and user not in via and user not in candidates for user in users[path])]
        while pending:
            path = pending.pop()
            if path not in candidates:
                continue
            candidates.discard(path)  # used from outside: so is everything it imports
            pending.extend(sorted(uses.get(path, ())))
        # of those, the ones a blocked module reaches (not a cycle no blocked code uses)
        pending = sorted(path for path in candidates if any(user in blocked or user in via for user in users[path]))
        while pending:
            path = pending.pop(0)
            if path in via:
                continue
            via[path] = (min(user for user in users[path] if user in blocked or user in via), ONLY_FROM_BLOCKED)
            pending.extend(sorted(q for q in uses.get(path, ()) if q in candidates and q not in via))
    return tuple(sorted((f, step, package) for f, (step, package) in via.items()))


#: the import of torch_npu's run-time patcher, as :func:`_imported_names` gives it
TRANSFER_TO_NPU = "torch_npu.contrib.transfer_to_npu"


def _patched(imports: dict[str, set[str]]) -> tuple[tuple[str, str], ...]:
    """``(file, patcher)`` for the files that import a file importing
    :data:`TRANSFER_TO_NPU` (directly or through other files of the run), and the
    patchers themselves."""
    patchers = sorted(path for path, names in imports.items() if TRANSFER_TO_NPU in names)
    if not patchers:
        return ()
    importers: dict[str, list[str]] = {}
    for imported, importer in _import_edges(imports, packages=True):
        importers.setdefault(imported, []).append(importer)
    via = {path: path for path in patchers}
    pending = list(patchers)
    while pending:
        imported = pending.pop(0)
        for importer in sorted(importers.get(imported, ())):
            if importer not in via:
                via[importer] = via[imported]
                pending.append(importer)
    return tuple(sorted(via.items()))


def _import_edges(imports: dict[str, set[str]], packages: bool = False) -> set[tuple[str, str]]:
    """(imported file, importing file) for the files of the run that another file of
    the run imports: a dotted name
    ``a.b`` imported by ``dir/x.py`` is ``a.py`` or ``a/b.py`` in ``dir`` (a script's
    own directory is the first entry of ``sys.path``) or in a directory above it, up
    to the run's common root (``tools/train.py`` that puts the repository root on
    ``sys.path``), or in the root's ``src`` folder (a project in the src layout, whose
    tests import ``alpaca_farm`` from ``src/alpaca_farm``: held-out round 16)."""
    if not imports:
        return set()
    root = os.path.commonpath([os.path.dirname(p) for p in imports])
    while os.path.join(root, "__init__.py") in imports and os.path.dirname(root) != root:
        root = os.path.dirname(root)  # a run of a package's own folder: `from pkg.x import y` names it from above
    # What each directory from the root down holds of the run's files (``a`` for
    # ``a.py`` and for ``a/...``): a name whose first part is not there cannot be
    # a file of the run from that directory, so no path is joined for it.
    children: dict[str, set[str]] = {}
    for path in imports:
        below, name = os.path.split(path)
        name = name.removesuffix(".py")
        while True:
            kids = children.setdefault(below, set())
            if name in kids:
                break
            kids.add(name)
            if below == root or os.path.dirname(below) == below:
                break
            below, name = os.path.split(below)
    found: set[tuple[str, str]] = set()
    for path, names in imports.items():
        directory = os.path.dirname(path)
        bases = [directory]
        while directory != root and os.path.dirname(directory) != directory:
            directory = os.path.dirname(directory)
            bases.append(directory)
        if "src" in children.get(root, ()):
            bases.append(os.path.join(root, "src"))  # the src layout: its packages import from there
        for name in names:
            parts = name.split(".")
            for base in bases:
                if parts[0] not in children.get(base, ()):
                    continue
                for k in range(1, len(parts) + 1):
                    candidates = [os.path.join(base, *parts[:k]) + ".py"]
                    if packages:  # `import pkg.sub` runs pkg/__init__.py and pkg/sub/__init__.py
                        candidates.append(os.path.join(base, *parts[:k], "__init__.py"))
                    for candidate in candidates:
                        if candidate != path and candidate in imports:
                            found.add((candidate, path))
    return found
