"""A minimal front end used to test the pipeline every file type shares
(discovery, dispatch, diff, --write, --check, the report, suppression comments,
per-file ignores, the cache, --annotate) independently of any real format.

Files ``*.fake``: each word ``cuda`` becomes ``npu`` (rule NPU990, a fix), and
each word ``nccl`` is reported (rule NPU991, a finding). ``#`` starts a comment;
a suppression comment on a line of its own covers the next line.
"""

from __future__ import annotations

import re

from npu_migrate.pipeline.edits import Recorder, finish
from npu_migrate.pipeline.filetypes import FileType
from npu_migrate.pipeline.model import FileResult
from npu_migrate.pipeline.suppression import Suppressions, parse

FAKE = FileType("fake", "tests.engine.fake_frontend:migrate", suffixes=(".fake",), example_name="x.fake")

_WORD = re.compile(rb"\b(cuda|nccl)\b")


def migrate(path: str, data: bytes, settings) -> FileResult:
    result = FileResult(path=path)
    if b"\0" in data:
        result.error = f"{path}:1: not a fake file"
        return result
    recorder = Recorder()
    suppressions = Suppressions()
    offset = 0
    for number, line in enumerate(data.splitlines(keepends=True), start=1):
        code, _, comment = line.partition(b"#")
        codes = parse("#" + comment.decode()) if comment else None
        if codes is not None:
            suppressions.add(number + (0 if code.strip() else 1), number + (0 if code.strip() else 1), codes)
        for match in _WORD.finditer(code):
            start = offset + match.start()
            if match.group() == b"cuda":
                recorder.replace(start, start + 4, "npu", "NPU990", "`cuda` -> `npu`")
            else:
                recorder.report(start, "NPU991", "`nccl` has no effect", "use hccl", statement=offset)
        offset += len(line)
    return finish(result, data, recorder, settings, suppressions)
