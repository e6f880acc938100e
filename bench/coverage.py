"""Coverage audit: which CUDA-isms are left after ``npu-migrate --write``, and were they reported?

Steps, on a scratch copy of the corpus (the cache is never written):

1. ``npu-migrate <copy> --write --report r1.json`` (the migration a user runs);
2. ``npu-migrate <copy> --check --report r2.json`` must exit 0 (idempotency);
3. every output file must parse (``ast.parse``) when its original did;
4. every output file is scanned with :mod:`tokenize` for CUDA-isms left in
   code (see :func:`scan`); each one is *reported* when the first run's report
   has a finding on its line (or statement), else it is *silent*;
5. the second pass: the report of step 2 (a run over the migrated output) must
   still list every unresolved construct, so a user who runs the tool on an
   already-migrated tree sees what is left for manual work. A leftover the first
   run reported but the second does not (on its line or statement) is *lost*,
   and so is every first-run finding (file, rule, message) that the second run
   does not repeat.

The report a user reads is the one of the migrating run; after ``--write`` its
positions are those of the written file, where the scan looks. Output lines are
mapped back to original lines with ``difflib.SequenceMatcher`` opcodes only to
tell leftovers the tool introduced from those it kept. A leftover the second
run reports but the first did not was silent when it mattered (counted as
"late").

    python -m bench.coverage [--projects accelerate] [--sample N] [--jobs N] [--no-files]

The repository files of pinned sdists (configs, requirements, notebooks,
launchers: ``bench/repo_corpus.py``) are audited the same way by
``bench/coverage_files.py`` unless ``--no-files`` is given.

Exit status 0 when there are no silent leftovers, no parse failures, no
idempotency failures and nothing lost by the second pass, else 1.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    RESULTS_DIR,
    finding_line,
    idempotency_failures,
    load_report,
    markdown_table,
    npu_migrate_cmd,
    tally,
)
from bench.corpus import (
    Project,
    default_cache_dir,
    ensure_corpus,
    parse_projects,
    python_files,
)

# --------------------------------------------------------------------------- scanner

PATTERNS = (
    "torch.cuda",            # torch.cuda.X, import torch.cuda, from torch import cuda, alias.X
    "torch.cuda.amp",        # the deprecated AMP namespace, in any import form
    ".cuda()",               # x.cuda(...)
    ".is_cuda",              # x.is_cuda
    "'cuda' device string",  # 'cuda', 'cuda:0', f'cuda:{i}', 'cuda:%d', 'cuda:{}'
    "nccl backend",          # 'nccl', 'NCCL', Backend.NCCL
    "CUDA env var",          # 'CUDA_VISIBLE_DEVICES', 'CUDA_LAUNCH_BLOCKING', 'PYTORCH_CUDA_ALLOC_CONF', ...
    "torch._C._cuda",        # torch's private CUDA bindings
)

_DEVICE_RE = re.compile(r"cuda(:(\d+|\{[^{}]*\}|%[dis])?)?")
_CUDA_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "PYTORCH_CUDA_ALLOC_CONF",
                       "CUDA_DEVICE_MAX_CONNECTIONS"})
_STRING_PREFIX_RE = re.compile(r"^([rRbBuUfF]*)('''|\"\"\"|'|\")")
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python >= 3.12
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}


@dataclass(frozen=True)
class Hit:
    line: int          # 1-based physical line of the match
    col: int
    pattern: str
    stmt_start: int    # first and last physical line of the enclosing logical line
    stmt_end: int
    generic: bool = False  # a string with its NPU counterpart in the same brackets / statement


def _string_value(text: str) -> str | None:
    """The value of a string literal's source; f-strings give their raw body; bytes give None."""
    m = _STRING_PREFIX_RE.match(text)
    if not m:
        return None
    prefix = m.group(1).lower()
    if "b" in prefix:
        return None
    if "f" in prefix:
        quote = m.group(2)
        return text[len(m.group(0)):-len(quote)] if text.endswith(quote) else None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


_COUNTERPART_RE = re.compile(r"npu(:(\d+|\{[^{}]*\}|%[dis])?)?|hccl|ASCEND_\w+|PYTORCH_NPU_ALLOC_CONF")


def _string_pattern(value: str) -> str | None:
    if _DEVICE_RE.fullmatch(value):
        return "'cuda' device string"
    if value.lower() == "nccl":
        return "nccl backend"
    if value in _CUDA_ENV:
        return "CUDA env var"
    return None


def _import_aliases(tree: ast.AST | None) -> tuple[set[str], dict[str, str], list[tuple[int, str]]]:
    """Names bound to torch, names bound to torch.cuda(.amp), and 'from torch import cuda' hits."""
    torch_names = {"torch"}
    cuda_names: dict[str, str] = {}
    extra: list[tuple[int, str]] = []
    if tree is None:
        return torch_names, cuda_names, extra
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch" and a.asname:
                    torch_names.add(a.asname)
                elif a.name in ("torch.cuda", "torch.cuda.amp") and a.asname:
                    cuda_names[a.asname] = "torch.cuda.amp" if a.name.endswith("amp") else "torch.cuda"
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for a in node.names:
                if node.module == "torch" and a.name == "cuda":
                    cuda_names[a.asname or "cuda"] = "torch.cuda"
                    extra.append((node.lineno, "torch.cuda"))
                elif node.module == "torch.cuda" and a.name == "amp":
                    cuda_names[a.asname or "amp"] = "torch.cuda.amp"
    return torch_names, cuda_names, extra


#: rules that report code left alone once, on the line of the function or class that holds it
WHOLE_REGION_RULES = frozenset({"NPU010", "NPU011"})


def _definitions(data: bytes) -> list[tuple[int, int]]:
    """The (`def`/`class` line, last line) of every function and class of ``data``."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return []
    return [(node.lineno, node.end_lineno or node.lineno) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def _enclosing(definitions: list[tuple[int, int]], line: int) -> set[int]:
    """The `def`/`class` lines of the functions and classes around ``line``."""
    return {start for start, end in definitions if start <= line <= end}


def scan(data: bytes) -> list[Hit]:
    """CUDA-isms in code: comments, docstrings and prose strings never count.

    Counted: a ``torch``-alias chain ``torch.cuda[.amp]`` (which also covers
    ``import torch.cuda`` and ``from torch.cuda[.amp] import ...``); ``from torch
    import cuda`` and attribute uses of names bound to torch.cuda; ``.cuda(``;
    ``.is_cuda``; ``Backend.NCCL``; ``torch._C._cuda*``/``_nccl*``; string literals
    whose whole value is a device string ('cuda', 'cuda:', 'cuda:0', f'cuda:{i}',
    'cuda:%d'), 'nccl' in any case, or a CUDA environment variable
    ('CUDA_VISIBLE_DEVICES', 'CUDA_LAUNCH_BLOCKING', 'PYTORCH_CUDA_ALLOC_CONF',
    'CUDA_DEVICE_MAX_CONNECTIONS'). Raises ``tokenize.TokenError``/``SyntaxError``
    on untokenizable input.
    """
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        tree = None
    torch_names, cuda_names, extra = _import_aliases(tree)
    source_lines = data.decode(tokenize.detect_encoding(io.BytesIO(data).readline)[0],
                               errors="replace").splitlines(keepends=True)

    toks = [t for t in tokenize.tokenize(io.BytesIO(data).readline) if t.type not in _SKIP]
    raw: list[tuple[int, int, str, int]] = []  # (line, col, pattern, token index)
    # Device-generic code names the NPU next to CUDA: ("cuda", "npu", "xpu"), "hccl" if npu else "nccl".
    # Per bracket group (the base entry is the logical line): [has an NPU counterpart, raw indexes].
    groups: list[list] = [[False, []]]
    generic: set[int] = set()

    def close_group() -> None:
        has_npu, members = groups.pop()
        if has_npu:
            generic.update(members)
            if groups:  # an enclosing group (or the statement) names the NPU through this one
                groups[-1][0] = True

    def string_hit(line: int, col: int, value: str | None, i: int, j: int) -> None:
        if value is None or is_docstring(i, j):
            return
        if _COUNTERPART_RE.fullmatch(value):
            groups[-1][0] = True
        pat = _string_pattern(value)
        if pat:
            groups[-1][1].append(len(raw))
            raw.append((line, col, pat, i))

    def text_between(start, end) -> str:
        (r1, c1), (r2, c2) = start, end
        if r1 == r2:
            return source_lines[r1 - 1][c1:c2]
        return source_lines[r1 - 1][c1:] + "".join(source_lines[r1:r2 - 1]) + source_lines[r2 - 1][:c2]

    def is_docstring(i: int, j: int) -> bool:
        """tokens i..j form one string expression statement on their own."""
        before = toks[i - 1].type if i > 0 else tokenize.NEWLINE
        after = toks[j + 1].type if j + 1 < len(toks) else tokenize.ENDMARKER
        return before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) and \
            after in (tokenize.NEWLINE, tokenize.ENDMARKER)

    def tok_is(k: int, typ: int, s: str | None = None) -> bool:
        return 0 <= k < len(toks) and toks[k].type == typ and (s is None or toks[k].string == s)

    i = 0
    while i < len(toks):
        t = toks[i]
        if _FSTRING_START is not None and t.type == _FSTRING_START:
            depth, j = 1, i + 1
            while j < len(toks) and depth:
                depth += (toks[j].type == _FSTRING_START) - (toks[j].type == _FSTRING_END)
                j += 1
            j -= 1
            string_hit(t.start[0], t.start[1], _string_value(text_between(t.start, toks[j].end)), i, j)
            i = j + 1
            continue
        if t.type == tokenize.OP and t.string in "([{":
            groups.append([False, []])
        elif t.type == tokenize.OP and t.string in ")]}" and len(groups) > 1:
            close_group()
        elif t.type == tokenize.NEWLINE:
            while groups:
                close_group()
            groups.append([False, []])
        if t.type == tokenize.STRING:
            string_hit(t.start[0], t.start[1], _string_value(t.string), i, i)
        elif t.type == tokenize.NAME and t.string == "Backend" and tok_is(i + 1, tokenize.OP, ".") \
                and tok_is(i + 2, tokenize.NAME, "NCCL"):
            raw.append((t.start[0], t.start[1], "nccl backend", i))
        elif t.type == tokenize.NAME and not tok_is(i - 1, tokenize.OP, "."):
            # start of a dotted chain
            if t.string in torch_names and tok_is(i + 1, tokenize.OP, ".") and tok_is(i + 2, tokenize.NAME, "_C") \
                    and tok_is(i + 3, tokenize.OP, ".") and i + 4 < len(toks) \
                    and toks[i + 4].string.startswith(("_cuda", "_nccl")):
                raw.append((t.start[0], t.start[1], "torch._C._cuda", i))
            elif t.string in torch_names and tok_is(i + 1, tokenize.OP, ".") and tok_is(i + 2, tokenize.NAME, "cuda"):
                amp = tok_is(i + 3, tokenize.OP, ".") and tok_is(i + 4, tokenize.NAME, "amp")
                raw.append((t.start[0], t.start[1], "torch.cuda.amp" if amp else "torch.cuda", i))
            elif t.string in cuda_names and tok_is(i + 1, tokenize.OP, "."):
                raw.append((t.start[0], t.start[1], cuda_names[t.string], i))
        elif t.type == tokenize.OP and t.string == ".":
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            if nxt is not None and nxt.type == tokenize.NAME:
                if nxt.string == "cuda" and tok_is(i + 2, tokenize.OP, "("):
                    raw.append((nxt.start[0], nxt.start[1], ".cuda()", i))
                elif nxt.string == "is_cuda":
                    raw.append((nxt.start[0], nxt.start[1], ".is_cuda", i))
        i += 1

    # logical-line spans: a statement runs from the token after a NEWLINE up to the next NEWLINE
    starts: list[int] = []
    ends: list[int] = []
    begin = None
    for t in toks:
        if t.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        if begin is None:
            begin = t.start[0]
        if t.type == tokenize.NEWLINE:
            starts.append(begin)
            ends.append(t.start[0])
            begin = None

    def span(line: int) -> tuple[int, int]:
        import bisect
        k = bisect.bisect_right(starts, line) - 1
        if 0 <= k and starts[k] <= line <= ends[k]:
            return starts[k], ends[k]
        return line, line

    while groups:
        close_group()
    hits = [Hit(line, col, pat, *span(line), k in generic) for k, (line, col, pat, _) in enumerate(raw)]
    hits += [Hit(line, 0, pat, *span(line)) for line, pat in extra]
    fallback = _torch_npu_fallback_lines(tree)
    hits = [h for h in hits if h.line not in fallback]
    hits.sort(key=lambda h: (h.line, h.col))
    return hits


def _torch_npu_fallback_lines(tree: ast.AST | None) -> set[int]:
    """The lines of the ``except`` bodies of top-level ``try: import torch_npu`` guards:
    code for a machine without torch_npu (``torch.npu = torch.cuda``, ``from torch
    import cuda as tc``), CUDA on purpose (docs/decisions.md, "The CPU path")."""
    lines: set[int] = set()
    for node in getattr(tree, "body", ()):
        if isinstance(node, ast.Try) and any(
                isinstance(s, ast.Import) and any(a.name == "torch_npu" for a in s.names) for s in node.body):
            for handler in node.handlers:
                lines.update(range(handler.lineno, (handler.end_lineno or handler.lineno) + 1))
    return lines


# --------------------------------------------------------------------------- line mapping

def line_map(orig: list[str], out: list[str]) -> list[tuple[int, int] | None]:
    """For each output line (index 0 = line 1): the original line range [a, b) it comes from, 1-based.

    Equal lines map to themselves; lines of a replaced block map to the whole
    replaced original block; inserted lines map to None (the tool wrote them).
    """
    mapping: list[tuple[int, int] | None] = [None] * len(out)
    matcher = difflib.SequenceMatcher(None, orig, out, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(j2 - j1):
                mapping[j1 + k] = (i1 + k + 1, i1 + k + 2)
        elif tag == "replace":
            for k in range(j1, j2):
                mapping[k] = (i1 + 1, i2 + 1)
    return mapping


# --------------------------------------------------------------------------- audit

@dataclass
class Leftover:
    path: str
    line: int               # output line
    orig_lines: tuple[int, int] | None
    pattern: str
    text: str
    status: str             # "reported-line", "reported-stmt", "generic", "silent", "introduced"
    late: bool = False      # silent in run 1 but reported by the second run
    again: bool = False     # the second run (over the output) reports it on its line or statement

    @property
    def lost(self) -> bool:
        """Reported by the migrating run, no longer by a run over its output."""
        return self.status.startswith("reported") and not self.again


@dataclass
class Audit:
    files: int = 0
    lines: int = 0
    changed: int = 0
    tool_errors: list[tuple[str, str]] = field(default_factory=list)
    parse_failures: list[tuple[str, str]] = field(default_factory=list)
    orig_unparsable: int = 0
    idempotency_failures: list[str] = field(default_factory=list)
    check_exit: int | None = None
    write_exit: int | None = None
    before: Counter = field(default_factory=Counter)          # (project, pattern) -> count in originals
    leftovers: list[Leftover] = field(default_factory=list)
    project_of: dict = field(default_factory=dict)
    fixes: Counter = field(default_factory=Counter)
    findings: Counter = field(default_factory=Counter)
    scan_errors: list[tuple[str, str]] = field(default_factory=list)
    seconds_write: float = 0.0
    unlisted: list[str] = field(default_factory=list)   # corpus files missing from the --write report
    findings_again: Counter = field(default_factory=Counter)  # rule -> findings of the second run
    # second pass: (path, rule, message) of findings the run over the output no longer / newly reports
    lost_findings: list[tuple[str, str, str]] = field(default_factory=list)
    new_findings: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def silent(self) -> list[Leftover]:
        return [x for x in self.leftovers if x.status in ("silent", "introduced")]

    @property
    def lost(self) -> list[Leftover]:
        return [x for x in self.leftovers if x.lost]

    def ok(self) -> bool:
        return not (self.silent or self.parse_failures or self.idempotency_failures or self.check_exit not in (0,)
                    or self.lost or self.lost_findings)


def _parses(data: bytes) -> str | None:
    try:
        ast.parse(data)
    except (SyntaxError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _orig_range(mapping: list, a: int, b: int) -> tuple[int, int] | None:
    """The original lines [start, end) covering output lines a..b (1-based, inclusive)."""
    spans = [mapping[k - 1] for k in range(a, b + 1) if 0 < k <= len(mapping) and mapping[k - 1]]
    if not spans:
        return None
    return min(s[0] for s in spans), max(s[1] for s in spans)


def compare_findings(first: dict[str, dict], second: dict[str, dict], audit: Audit) -> None:
    """The second pass, finding by finding: every finding of the migrating run (file,
    rule, position in the written file, message) must be reported again, at the same
    place, by a run over its output."""
    def findings(report: dict[str, dict]) -> Counter:
        return Counter((path, f.get("rule", "?"), f"{f.get('line')}:{f.get('col')}: {f.get('message', '')}")
                       for path, entry in report.items() for f in entry.get("findings") or [])

    once, again = findings(first), findings(second)
    audit.findings_again = Counter(rule for (_, rule, _), n in again.items() for _ in range(n))
    audit.lost_findings = sorted((once - again).elements())
    audit.new_findings = sorted((again - once).elements())


def audit(projects: list[Project], sample: int = 1, jobs: int = 0, scratch: Path | None = None,
          log=print) -> Audit:
    result = Audit()
    own_scratch = scratch is None
    work = Path(tempfile.mkdtemp(prefix="npu-migrate-coverage-")) if own_scratch else Path(scratch)
    try:
        rels: list[tuple[Project, Path, str]] = []
        for p in projects:
            for rel in python_files(p.root, sample):
                key = f"{p.label}/{rel.as_posix()}"
                dest = work / key
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p.root / rel, dest)
                rels.append((p, rel, key))
                result.project_of[key] = p.name
        result.files = len(rels)
        targets = [p.label for p in projects] if sample == 1 else [key for _, _, key in rels]
        jobs_args = ["--jobs", str(jobs)] if jobs else []
        r1, r2 = work / "report-write.json", work / "report-check.json"

        log(f"npu-migrate --write on a scratch copy of {len(rels):,} files ...")
        start = time.perf_counter()
        proc = subprocess.run(npu_migrate_cmd() + targets + ["--write", "--no-diff", "--no-cache", "-q",
                                                             "--report", str(r1)] + jobs_args,
                              cwd=work, capture_output=True, text=True, errors="replace")
        result.seconds_write = time.perf_counter() - start
        result.write_exit = proc.returncode
        if not r1.is_file():
            raise RuntimeError(f"npu-migrate --write wrote no report (exit {proc.returncode}): {proc.stderr[-2000:]}")
        rep1 = load_report(r1)["by_path"]

        log("npu-migrate --check on the output (idempotency) ...")
        proc2 = subprocess.run(npu_migrate_cmd() + targets + ["--check", "--no-diff", "--no-cache", "-q",
                                                              "--report", str(r2)] + jobs_args,
                               cwd=work, capture_output=True, text=True, errors="replace")
        result.check_exit = proc2.returncode
        rep2 = load_report(r2)["by_path"] if r2.is_file() else {}
        result.idempotency_failures = idempotency_failures(rep2, proc2.returncode)
        tally(rep1, result.fixes, result.findings, result.tool_errors)
        compare_findings(rep1, rep2, result)

        result.unlisted = sorted(key for _, _, key in rels if key not in rep1)
        log("scanning outputs ...")
        for p, rel, key in rels:
            orig = (p.root / rel).read_bytes()
            out = (work / key).read_bytes()
            result.lines += orig.count(b"\n")
            changed = orig != out
            result.changed += changed
            orig_err = _parses(orig)
            if orig_err:
                result.orig_unparsable += 1
            elif changed:
                err = _parses(out)
                if err:
                    result.parse_failures.append((key, err))
            try:
                before = scan(orig)
                hits = scan(out) if changed else before
            except (tokenize.TokenError, SyntaxError, IndentationError) as exc:
                result.scan_errors.append((key, f"{type(exc).__name__}: {exc}"))
                continue
            for h in before:
                result.before[(p.name, h.pattern)] += 1
            # device-generic only where the original already named the NPU there: an "npu" the tool
            # wrote next to a CUDA string it left must not hide that string
            orig_generic = {(h.line, h.col) for h in before if h.generic}
            if not hits:
                continue
            entry1 = rep1.get(key) or {}
            entry2 = rep2.get(key) or {}
            found1 = {finding_line(f) for f in entry1.get("findings") or []}
            found2 = {finding_line(f) for f in entry2.get("findings") or []}
            # a function or class left alone as a whole is reported once, on its `def` line
            whole1 = {finding_line(f) for f in entry1.get("findings") or [] if f.get("rule") in WHOLE_REGION_RULES}
            whole2 = {finding_line(f) for f in entry2.get("findings") or [] if f.get("rule") in WHOLE_REGION_RULES}
            definitions = _definitions(out) if whole1 or whole2 else []  # parsed once per file
            out_lines = out.decode("utf-8", errors="replace").splitlines()
            orig_text = orig.decode("utf-8", errors="replace").splitlines() if changed else out_lines
            if changed:
                mapping = line_map(orig_text, out_lines)
            else:
                mapping = [(k + 1, k + 2) for k in range(len(out_lines))]

            for h in hits:
                line_rng = _orig_range(mapping, h.line, h.line)
                if line_rng is None:
                    status = "introduced"
                elif h.line in found1:
                    status = "reported-line"
                elif any(h.stmt_start <= n <= h.stmt_end for n in found1):
                    status = "reported-stmt"
                elif whole1 & _enclosing(definitions, h.line):
                    status = "reported-stmt"
                elif h.generic and line_rng and line_rng[1] - line_rng[0] == 1 \
                        and orig_text[line_rng[0] - 1] == out_lines[h.line - 1] \
                        and (line_rng[0], h.col) in orig_generic:
                    status = "generic"
                else:
                    status = "silent"
                again = any(h.stmt_start <= n <= h.stmt_end for n in found2) \
                    or bool(whole2 & _enclosing(definitions, h.line))
                late = status == "silent" and again
                text = out_lines[h.line - 1].strip() if h.line <= len(out_lines) else ""
                result.leftovers.append(Leftover(key, h.line, line_rng, h.pattern, text, status, late, again))
    finally:
        if own_scratch:
            shutil.rmtree(work, ignore_errors=True)
    return result


# --------------------------------------------------------------------------- rendering

def render(a: Audit, projects: list[Project], sample: int, max_list: int = 1000) -> str:
    names = [p.name for p in projects]
    left = Counter((a.project_of[x.path], x.pattern) for x in a.leftovers)
    rep = Counter((a.project_of[x.path], x.pattern) for x in a.leftovers if x.status.startswith("reported"))
    gen = Counter((a.project_of[x.path], x.pattern) for x in a.leftovers if x.status == "generic")
    sil = Counter((a.project_of[x.path], x.pattern) for x in a.leftovers if x.status in ("silent", "introduced"))

    def rows(keys, key_fn):
        def total(counter, k):
            return sum(v for kk, v in counter.items() if key_fn(kk) == k)

        out = [[k] + [total(c, k) for c in (a.before, left, rep, gen, sil)] for k in keys]
        out.append(["**total**"] + [sum(c.values()) for c in (a.before, left, rep, gen, sil)])
        return out

    header = ["", "before (originals)", "left after --write", "left, reported",
              "left, unreported, NPU counterpart beside it", "left, silent"]
    lines = [
        "# npu-migrate coverage audit",
        "",
        f"Corpus: {', '.join(p.label for p in projects)}" + (f"; one file in {sample}" if sample > 1 else "")
        + f" ({a.files:,} files, {a.lines:,} lines); {a.changed:,} files changed by `--write` "
        f"({a.seconds_write:.1f} s). Measured {time.strftime('%Y-%m-%d %H:%M')}.",
        "",
        f"- silent leftovers: **{len(a.silent)}** (goal 0)"
        + (f", of which {sum(x.status == 'introduced' for x in a.silent)} on lines the tool inserted" if a.silent else ""),
        f"- parse failures (original parsed, output does not): **{len(a.parse_failures)}** (goal 0); "
        f"originals Python {sys.version_info.major}.{sys.version_info.minor} cannot parse: {a.orig_unparsable}",
        f"- idempotency failures (files `--check` would change again): **{len(a.idempotency_failures)}** "
        f"(goal 0); `--check` exit status {a.check_exit}",
        f"- files the tool could not process (report `error`): {len(a.tool_errors)}; `--write` exit status {a.write_exit}; "
        f"corpus files missing from its report: {len(a.unlisted)}",
        f"- leftovers reported only on another line of the same statement: "
        f"{sum(x.status == 'reported-stmt' for x in a.leftovers)}; silent ones the second run reports (late): "
        f"{sum(x.late for x in a.leftovers)}",
        f"- second pass (a run over the migrated output): reported leftovers it no longer reports: "
        f"**{len(a.lost)}** (goal 0); findings of the first run it does not repeat: **{len(a.lost_findings)}** "
        f"(goal 0) of {sum(a.findings.values())}; findings only it reports: {len(a.new_findings)} "
        f"(it reports {sum(a.findings_again.values())} in all)",
        "",
        "## Per project",
        "",
        markdown_table(["project"] + header[1:], rows(names, lambda k: k[0])),
        "",
        "## Per pattern",
        "",
        markdown_table(["pattern"] + header[1:], rows(list(PATTERNS), lambda k: k[1])),
        "",
        "## Fixes and findings per rule (first run)",
        "",
        markdown_table(["rule", "fixes", "findings", "findings, second run"],
                       [[r, a.fixes.get(r, 0), a.findings.get(r, 0), a.findings_again.get(r, 0)]
                        for r in sorted(set(a.fixes) | set(a.findings) | set(a.findings_again))]
                       + [["**total**", sum(a.fixes.values()), sum(a.findings.values()),
                           sum(a.findings_again.values())]]),
        "",
    ]
    for title, items in (("Parse failures", a.parse_failures), ("Tool errors", a.tool_errors),
                         ("Idempotency failures", [(x, "") for x in a.idempotency_failures]),
                         ("Corpus files missing from the report", [(x, "") for x in a.unlisted]),
                         ("Files the audit could not tokenize", a.scan_errors)):
        if items:
            lines += [f"## {title}", ""] + [f"- `{k}` {v}".rstrip() for k, v in items[:max_list]] + [""]
    for title, items in (("Findings the second run lost", a.lost_findings),
                         ("Findings only the second run reports", a.new_findings)):
        if items:
            lines += [f"## {title}", ""] + [f"- `{p}` {r}: {m[:200]}" for p, r, m in items[:max_list]] + [""]
    if a.lost:
        lines += ["## Leftovers the second run lost", ""]
        lines += [f"- `{x.path}:{x.line}` {x.pattern}: `{x.text[:160]}`" for x in a.lost[:max_list]] + [""]
    if a.silent:
        lines += ["## Silent leftovers", "", "`file:line` of the output, `[original line]`, pattern, text:", ""]
        for x in a.silent[:max_list]:
            where = f"[{x.orig_lines[0]}]" if x.orig_lines else "[inserted]"
            lines.append(f"- `{x.path}:{x.line}` {where} {x.pattern}: `{x.text[:160]}`")
        if len(a.silent) > max_list:
            lines.append(f"- ... and {len(a.silent) - max_list} more (all are printed by the script)")
        lines.append("")
    lines += [
        "A leftover is *reported* when the first run's report has a finding on the original line the output "
        "line maps to (difflib opcodes), or on another line of the same statement; lines the tool inserted "
        "have no original and count as silent. A device string with its NPU counterpart in the same brackets "
        "or statement (`(\"cuda\", \"npu\", \"xpu\")`, `\"hccl\" if npu else \"nccl\"`) is device-generic code: "
        "counted apart, not as silent.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="npu-migrate coverage audit")
    ap.add_argument("--projects", help="comma-separated subset, e.g. accelerate,timm")
    ap.add_argument("--sample", type=int, default=1, help="take every Nth file (default 1: all)")
    ap.add_argument("--jobs", type=int, default=0, help="--jobs for npu-migrate (default: its own)")
    ap.add_argument("--cache-dir", type=Path, default=None, help=f"corpus cache (default {default_cache_dir()})")
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "coverage.md")
    ap.add_argument("--json", type=Path, help="also write every leftover as JSON here")
    ap.add_argument("--no-files", dest="files", action="store_false",
                    help="skip the repository files (configs, requirements, notebooks, launchers of pinned sdists)")
    args = ap.parse_args(argv)
    projects = ensure_corpus(parse_projects(args.projects), args.cache_dir)
    if not projects:
        print("no project could be downloaded", file=sys.stderr)
        return 2
    a = audit(projects, args.sample, args.jobs, log=lambda m: print(m, file=sys.stderr))
    text = render(a, projects, args.sample)
    files_ok = True
    if args.files:  # the non-Python files: bench/coverage_files.py
        from bench.coverage_files import audit_files, render_files
        from bench.repo_corpus import ensure_repo_corpus

        repo = ensure_repo_corpus(cache_dir=args.cache_dir)
        if repo:
            files = audit_files(repo, args.jobs, log=lambda m: print(m, file=sys.stderr))
            text += "\n" + render_files(files, repo)
            files_ok = files.ok()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text)
    if a.silent:
        print(f"All {len(a.silent)} silent leftovers:")
        for x in a.silent:
            print(f"{x.path}:{x.line}: [{x.pattern}] {x.text}")
    if args.json:
        args.json.write_text(json.dumps([x.__dict__ for x in a.leftovers], indent=1), encoding="utf-8")
    print(f"written to {args.output}", file=sys.stderr)
    return 0 if a.ok() and files_ok else 1


if __name__ == "__main__":
    sys.exit(main())
