"""NPU401 / NPU402 logic that fixtures express awkwardly: odd code, composition
with the AMP rules, argument layout."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from npu_migrate.rules.checkpoint.npu401_scaler_checkpoint_state import scaler_key

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source


def run(source: str, *codes: str):
    result = migrate_source(
        "t.py", source.encode(), Settings(selection=Selection.create(list(codes)))
    )
    assert result.error is None, result.error
    return result


def output(source: str, *codes: str) -> str:
    result = run(source, *codes)
    return result.new_source.decode() if result.new_source is not None else source


ODD = """
import torch
from torch.cuda.amp import GradScaler
from torch.utils.data import DataLoader, DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP

type Alias = list[int]

def generic[T](x: T) -> T:
    return x

@decorator(torch.load)
def f(*args, **kwargs):
    torch.load(*args, **kwargs)
    g = lambda p: torch.load(p)
    if (ck := torch.load("x")) is not None:
        pass
    match ck:
        case {"optimizer": opt}:
            opt.load_state_dict(ck["optimizer"])
        case _:
            pass
    torch.save({**kwargs}, "p")
    torch.save(obj=None, f="p")
    torch.save()
    x = f"{torch.load}"
    return [DataLoader(d, shuffle=True) for d in args]

scaler = GradScaler()
torch.save({"optimizer": (lambda: 1)(), 1: 2, "o" "ptimizer": None}, "p")
optim.load_state_dict(ck[0])
optim.load_state_dict(ck[k])
optim.load_state_dict(*ck)
for (a, b) in range(3):
    for x in DataLoader(ds, shuffle=True):
        DDP(x)
s = DistributedSampler(ds)
"""


@pytest.mark.parametrize("code", ["NPU401", "NPU402", "NPU501", "NPU502"])
def test_odd_code_does_not_crash_and_stays_valid(code):
    out = output(ODD, code)
    cst.parse_module(out)  # still valid Python (3.12 syntax: libcst, not ast)
    assert run(out, code).new_source is None  # and converged


SCRIPT = """\
import torch
from torch.cuda.amp import GradScaler


def main(model, optimizer, path):
    scaler = torch.cuda.amp.GradScaler()
    ckpt = torch.load(path)
    optimizer.load_state_dict(ckpt["optimizer"])
    torch.save({"optimizer": optimizer.state_dict()}, path)
"""


def test_composes_with_the_other_rules_in_one_run():
    """The AMP rules (NPU3xx) may rewrite the GradScaler constructor in the same
    run: the checkpoint edits must survive whatever they do to it."""
    out = output(SCRIPT, "NPU1", "NPU3", "NPU4")
    assert '"scaler": scaler.state_dict()' in out
    assert (
        'if "scaler" in ckpt:\n        scaler.load_state_dict(ckpt["scaler"])\n' in out
    )
    assert 'torch.load(path, map_location="cpu")' in out
    assert run(out, "NPU1", "NPU3", "NPU4").new_source is None


@pytest.mark.parametrize(
    "constructor",
    [
        "torch.cuda.amp.GradScaler()",
        'torch.amp.GradScaler("npu")',
        "torch.amp.GradScaler('cuda', enabled=True)",
        "torch.npu.amp.GradScaler()",
    ],
)
def test_scaler_forms_before_and_after_the_amp_rewrite(constructor):
    source = f"import torch\nscaler = {constructor}\ntorch.save({{'optimizer': opt.state_dict()}}, p)\n"
    assert "'scaler': scaler.state_dict()" in output(source, "NPU401")


def test_scaler_assigned_after_the_save_in_the_same_scope_is_not_used():
    source = (
        "import torch\n"
        "def main(opt, p):\n"
        "    torch.save({'optimizer': opt.state_dict()}, p)\n"
        "    scaler = torch.cuda.amp.GradScaler()\n"
    )
    result = run(source, "NPU401")
    assert result.new_source is None
    assert [f.line for f in result.findings] == [3]


def test_reassigned_scaler_is_not_trusted():
    source = (
        "import torch\n"
        "scaler = torch.cuda.amp.GradScaler()\n"
        "scaler = make_other_thing()\n"
        "torch.save({'optimizer': opt.state_dict()}, p)\n"
    )
    result = run(source, "NPU401")
    assert result.new_source is None
    assert [f.rule for f in result.findings] == ["NPU401"]


@pytest.mark.parametrize(
    "optimizer_key,expected",
    [
        ("optimizer", "scaler"),
        ("optimizer_state_dict", "scaler_state_dict"),
        ("optim", "scaler"),
        ("opt_state", "scaler_state"),
        ("optimizer_G", "scaler"),
        ("state", "scaler"),
        (None, "scaler"),
    ],
)
def test_scaler_key_mirrors_the_optimizer_key(optimizer_key, expected):
    assert scaler_key(optimizer_key) == expected


ARG = st.sampled_from(
    ["path", "'x.pt'", "weights_only=True", "mmap=False", "pickle_module=pickle"]
)


@hsettings(max_examples=60, deadline=None)
@given(
    first=st.sampled_from(["path", "'x.pt'", "buf"]),
    rest=st.lists(ARG.filter(lambda a: "=" in a), max_size=3, unique=True),
    multiline=st.booleans(),
    trailing=st.booleans(),
)
def test_map_location_is_added_in_any_layout(first, rest, multiline, trailing):
    args = [first, *rest]
    if multiline:
        body = (
            "".join(f"    {a},\n" for a in args)
            if trailing
            else ",\n".join(f"    {a}" for a in args) + "\n"
        )
        call = f"torch.load(\n{body})"
    else:
        call = "torch.load(" + ", ".join(args) + ("," if trailing else "") + ")"
    source = f"import torch\nx = {call}\n"
    out = output(source, "NPU402")
    tree = ast.parse(out)
    load = tree.body[1].value
    assert [k.arg for k in load.keywords][-1] == "map_location"
    assert ast.literal_eval(load.keywords[-1].value) == "cpu"
    assert ast.dump(load.args[0]) == ast.dump(ast.parse(first, mode="eval").body)
    if multiline:  # one argument per line stays one argument per line
        assert out.count("\n") == source.count("\n") + 1
        assert "    map_location=" in out
    else:
        assert out.count("\n") == source.count("\n")
    assert run(out, "NPU402").new_source is None


@pytest.mark.parametrize(
    "body,rewritten",
    [
        # the dict the save sees is found by walking back from the save
        ("state = {'optimizer': opt.state_dict()}\nif rank == 0:\n    torch.save(state, p)", True),
        ("if rank == 0:\n    state = {'optimizer': opt.state_dict()}\n    torch.save(state, p)", True),
        ("state = {'optimizer': opt.state_dict()}\nif a:\n    pass\nelif rank == 0:\n    torch.save(state, p)", True),
        ("for e in range(3):\n    state = {'optimizer': opt.state_dict()}\n    torch.save(state, p)", True),
        ("state = {'optimizer': opt.state_dict()}\ntry:\n    torch.save(state, p)\nexcept OSError:\n    pass", True),
        ("state = None\nstate = {'optimizer': opt.state_dict()}\nwith lock:\n    torch.save(state, p)", True),
        # another binding may reach the save: reported, not rewritten
        ("state = {'optimizer': opt.state_dict()}\nfor e in range(3):\n    torch.save(state, p)\n    state = {}", False),
        ("if a:\n    state = {'optimizer': opt.state_dict()}\ntorch.save(state, p)", False),
        ("state = {'optimizer': opt.state_dict()}\ntry:\n    state = load()\nexcept OSError:\n    torch.save(state, p)", False),
    ],
)
def test_saved_name_follows_the_binding_that_reaches_the_save(body, rewritten):
    indented = "".join(f"    {line}\n" for line in body.splitlines())
    source = f"import torch\n\ndef save(opt, p, rank, a, lock, load):\n    scaler = torch.cuda.amp.GradScaler()\n{indented}"
    result = run(source, "NPU401")
    if rewritten:
        assert result.new_source is not None
        assert "'scaler': scaler.state_dict()" in result.new_source.decode()
        assert result.findings == []
    else:
        assert result.new_source is None
        assert [f.rule for f in result.findings] == ["NPU401"]
