"""The coverage audit's CUDA-ism scanner and its output-to-original line mapping."""

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.coverage import PATTERNS, line_map, scan


def patterns(src: str) -> list[tuple[int, str]]:
    return [(h.line, h.pattern) for h in scan(src.encode())]


def test_each_pattern_is_found_in_code():
    src = (
        "import torch as th\n"                              # 1
        "from torch import cuda as C\n"                     # 2
        "from torch.cuda.amp import autocast\n"             # 3
        "x = th.cuda.is_available()\n"                      # 4
        "y = model.cuda()\n"                                # 5
        "ok = t.is_cuda\n"                                  # 6
        "d = f'cuda:{rank}'\n"                              # 7
        "dist.init_process_group(backend='nccl')\n"         # 8
        "os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"        # 9
        "C.synchronize()\n"                                 # 10
        "b = dist.Backend.NCCL\n"                           # 11
        "s = 'cuda:%d' % i\n"                               # 12
        "e = torch.device('cuda:0')\n"                      # 13
        "os.environ['CUDA_LAUNCH_BLOCKING'] = '1'\n"        # 14
        "dist.init_process_group(backend='NCCL')\n"         # 15
        "n = th._C._cuda_getDeviceCount()\n"                # 16
        "i = int(name.replace('cuda:', ''))\n"              # 17
    )
    assert patterns(src) == [
        (2, "torch.cuda"), (3, "torch.cuda.amp"), (4, "torch.cuda"), (5, ".cuda()"), (6, ".is_cuda"),
        (7, "'cuda' device string"), (8, "nccl backend"), (9, "CUDA env var"), (10, "torch.cuda"),
        (11, "nccl backend"), (12, "'cuda' device string"), (13, "'cuda' device string"), (14, "CUDA env var"),
        (15, "nccl backend"), (16, "torch._C._cuda"), (17, "'cuda' device string"),
    ]


def test_comments_docstrings_and_prose_do_not_count():
    src = (
        '"""Runs torch.cuda.synchronize() on \'cuda\' devices with nccl."""\n'
        "# x.cuda() and torch.cuda.amp and CUDA_VISIBLE_DEVICES\n"
        "def f():\n"
        "    'cuda'\n"
        "    msg = 'move the model to cuda first'\n"
        "    flag = b'cuda'\n"
        "    other = 'cudagraph'\n"
        "    backend = 'hccl'\n"
        "    return npu_device.type == 'npu'\n"
    )
    assert patterns(src) == []


def test_torch_backends_cuda_and_attribute_named_cuda_are_not_torch_cuda():
    # torch.backends.cuda is not torch.cuda; a plain attribute `.cuda` without a call is not .cuda()
    assert patterns("torch.backends.cuda.matmul.allow_tf32 = True\nflag = args.cuda\n") == []


def test_statement_span_of_a_multiline_call():
    hits = scan(b"z = foo(\n    a,\n    device='cuda')\nw = 1\n")
    assert [(h.line, h.stmt_start, h.stmt_end) for h in hits] == [(3, 1, 3)]


prose = st.text(alphabet=string.ascii_letters + " .:_'", max_size=40)


@settings(max_examples=200, deadline=None)
@given(prose)
def test_any_text_in_a_comment_never_counts(text):
    src = "x = 1  # " + text.replace("\n", " ") + "\n# torch.cuda " + text + "\n"
    assert patterns(src) == []


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["cuda", "cuda:0", "cuda:12", "nccl", "CUDA_VISIBLE_DEVICES"]), prose)
def test_only_exact_device_strings_count(word, pad):
    exact = patterns(f"v = {word!r}\n")
    assert len(exact) == 1 and exact[0][1] in PATTERNS
    padded = word + " " + pad if pad else word + " x"
    assert patterns(f"v = {padded!r}\n") == []


def test_line_map_equal_replace_insert():
    orig = ["a", "b", "c", "d"]
    out = ["a", "B1", "B2", "c", "new", "d"]
    m = line_map(orig, out)
    assert m[0] == (1, 2)          # equal
    assert m[1] == m[2] == (2, 3)  # replaced block maps to original line 2
    assert m[3] == (3, 4)
    assert m[4] is None            # inserted by the tool
    assert m[5] == (4, 5)


def test_device_strings_beside_their_npu_counterpart_are_marked_generic():
    src = (
        'a = ("xpu", "cuda", "npu")\n'                    # same brackets: generic
        'b = "hccl" if is_npu else "nccl"\n'              # same statement: generic
        'c = torch.device("cuda")\n'                      # no counterpart
        'd = foo("cuda", ["npu"])\n'                      # counterpart in a group inside the call
        'e = [torch.device("cuda"), ["npu"]]\n'          # counterpart in a sibling group only
        'f = x if x in {"npu", "xpu"} else "cuda"\n'      # statement level, counterpart inside
    )
    assert [(h.line, h.generic) for h in scan(src.encode())] == [
        (1, True), (2, True), (3, False), (4, True), (5, False), (6, True)]
