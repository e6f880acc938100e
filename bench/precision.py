"""The precision benchmark: is every edit npu-migrate proposes one a reviewer keeps?

Recall (``bench/coverage.py``) asks whether anything CUDA-specific is left; this
asks the opposite question, the one a reviewer asks of every hunk: is this edit
needed for Ascend and right (**correct**), harmless but unwanted (**needless**),
or does it break something, change the meaning, send NPU tensors to a CUDA
kernel, remove a CPU path or edit another system's platform name (**wrong**)?

The corpus is real repositories of today's training stack (LLM fine-tuning, RLHF,
pre-training frameworks, diffusion, vision), fetched at run time from PyPI with
exact versions and sha256 (an sdist where pip can fetch one, since it carries
configs, launchers and requirements; a wheel otherwise) into a cache outside the
repository; nothing of them is committed::

    $NPU_MIGRATE_CORPUS_CACHE (default ~/.cache/npu-migrate/corpus)/precision/
        dl/<artifact>                      what pip downloaded (sha256 checked)
        src/<project>-<version>/...        the unpacked tree

``npu-migrate`` runs on each tree as a user would (``npu-migrate .`` from its
root, a dry run with ``--diff --report``). The diff is split into **hunks**, one
per run of consecutive removed/added lines (a unified-diff hunk with several
edits in its context is several hunks here). A hunk's key is a hash of its file
path and its removed and added lines, never of line numbers, so a hunk keeps its
label while unrelated edits move it. Each hunk is attributed to the rules whose
fixes in the JSON report touch its removed lines (for a pure insertion: the
lines on either side). Its label comes from ``bench/labels/precision.jsonl``,
kept in the project: one JSON object a line with ``repo``, ``version``,
``file``, ``key``, ``label`` (correct / needless / wrong), ``rules`` (as seen
when labelled) and ``reason``.

A hunk nobody has labelled is **unlabelled**: the run says so loudly on stderr,
``--fail-on-unlabelled`` makes it exit 1, ``--show-unlabelled`` prints those
hunks in a reviewable form and ``--template FILE`` writes JSONL stubs to fill in.
For the largest repositories only a seeded random sample is labelled
(``SAMPLES``); hunks outside the sample are counted apart, not as unlabelled.

    python -m bench.precision [--projects trl,verl] [--show-unlabelled]
                              [--fail-on-unlabelled] [--template FILE] [--json FILE]
                              [--from-json FILE ...] [--output FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import REPO_ROOT, markdown_table, npu_migrate_cmd
from bench.corpus import CorpusError, default_cache_dir

LABELS_FILE = REPO_ROOT / "bench" / "labels" / "precision.jsonl"
LABELS = ("correct", "needless", "wrong")

#: pip arguments that pick one platform wheel whatever the host (the sha256 pins it).
CP311_LINUX = ["--only-binary", ":all:", "--python-version", "3.11", "--implementation", "cp",
               "--abi", "cp311", "--platform", "manylinux_2_28_x86_64", "--platform",
               "manylinux_2_24_x86_64", "--platform", "manylinux1_x86_64"]


@dataclass(frozen=True)
class PrecisionProject:
    name: str
    version: str
    kind: str            # llm-finetune / rlhf / pretrain / diffusion / vision
    artifact: str        # the exact file pip downloads
    sha256: str
    tuning: str = ""     # why it counts as a tuning repository ("" = held out)

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"

    @property
    def is_sdist(self) -> bool:
        return self.artifact.endswith((".tar.gz", ".zip")) and not self.artifact.endswith(".whl")

    def pip_args(self) -> list[str]:
        if self.is_sdist:
            return ["--no-binary", ":all:", "--no-build-isolation"]
        if "-cp311-" in self.artifact:
            return CP311_LINUX
        return ["--only-binary", ":all:"]


_CORPUS = "used in bench/corpus.py"
_ISSUE35 = "issue 35 quotes its shapes (the audit that asked for this benchmark)"
#: Every artifact was downloaded with ``pip download --no-deps`` on 2026-11-27 and its
#: sha256 recorded. "tuning" says where the tool was already tuned on the project
#: (bench/corpus.py, bench/repo_corpus.py, docs/llm-stack.md, docs/benchmarks.md,
#: tests); the others are held out. The issue-35 audit's eight repositories are not
#: named anywhere in the project; the two whose shapes it quotes (torchtitan's Helion gate and
#: `or "cuda"` fallback, OpenRLHF's FlashAttention-for-packing) count as tuning, but another held-out
#: project may have been among them.
PROJECTS: list[PrecisionProject] = [
    # LLM fine-tuning
    PrecisionProject("trl", "1.16.0", "llm-finetune", "trl-1.16.0-py3-none-any.whl",
                     "c4726e139dd40e1a41661511c639c8a68416782b2e3e8c0befebd77bb7ba0396", _CORPUS),
    PrecisionProject("peft", "0.21.2", "llm-finetune", "peft-0.21.2.tar.gz",
                     "b803ccfb3f3f316004d850284306687833a2235ea278fb56abc856203456142e", _CORPUS),
    PrecisionProject("llamafactory", "0.9.5", "llm-finetune", "llamafactory-0.9.5-py3-none-any.whl",
                     "10776e9b259798bf65f6c5343f6298f0302e92e9cd47472abe29eef69e286c6a",
                     "LLaMA-Factory read for docs/llm-stack.md and the launcher benchmark"),
    PrecisionProject("litgpt", "0.5.13", "llm-finetune", "litgpt-0.5.13.tar.gz",
                     "77be78814d0334e8e32ee6dac417e9718ebad45529458995ca255af24cf15cf3",
                     "a shape from it in tests/engine/test_cuda_only.py"),
    PrecisionProject("axolotl", "0.19.0", "llm-finetune", "axolotl-0.19.0.tar.gz",
                     "136d623f04c909c5149d7f5dbd4a0e215014ab4c3617cce9d64010b5b8ca609d"),
    PrecisionProject("torchtune", "0.6.1", "llm-finetune", "torchtune-0.6.1-py3-none-any.whl",
                     "bcbc4ee9774b5c5829a5ff13df851e0b0e32416c018af8db53faa3472ac256e7"),
    PrecisionProject("unsloth", "2026.10.9", "llm-finetune", "unsloth-2026.10.9-py3-none-any.whl",
                     "feb40b99bc4f8c543a36cbd0fe6e1410d6e4ac16bd4d0c731f607adce3d63bb0"),
    PrecisionProject("ms-swift", "4.6.0", "llm-finetune", "ms_swift-4.6.0.tar.gz",
                     "8483da407748abc01e106b54c25d6453eb2ef4a6e136dab001b9a522c9c80d71"),
    PrecisionProject("xtuner", "0.2.0", "llm-finetune", "xtuner-0.2.0.tar.gz",
                     "bcb5e28116e7ac9474bcd71ba8e1c9cc95256ee8a2f6831818985c0d20b68440"),
    PrecisionProject("sentence-transformers", "6.2.0", "llm-finetune",
                     "sentence_transformers-6.2.0-py3-none-any.whl",
                     "ffb51ccfef65427cfa61776d0eeeb257600b0099cf0c7533ae9a6856d31e4665"),
    # RLHF
    PrecisionProject("verl", "0.9.1", "rlhf", "verl-0.9.1.tar.gz",
                     "3e03d8816b2546b2c5580705671b8d0bb3f79b8364e7b5c56dbfc1245536ba22"),
    PrecisionProject("openrlhf", "0.11.2", "rlhf", "openrlhf-0.11.2-cp311-cp311-manylinux1_x86_64.whl",
                     "c969d70db03a70724c3d8a5a01186c6e0728bce624fb3dff95e39b5396acefa6",
                     _ISSUE35),
    PrecisionProject("torchrl", "0.14.1", "rlhf",
                     "torchrl-0.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
                     "391279fb7fb09603f4c16dbc779d5c135ab5ed25810fb42159d70a7ff8126e1a"),
    # pre-training frameworks and kernels
    PrecisionProject("accelerate", "1.15.0", "pretrain", "accelerate-1.15.0.tar.gz",
                     "5654f8c5eaa0d4fa68b33e287a97765da6849bf6d51dcac874e73fbbddfb6134", _CORPUS),
    PrecisionProject("lightning", "2.6.6", "pretrain", "lightning-2.6.6.tar.gz",
                     "1c6329e241f8a85f29fedead89c1ee138b36caa08de60c260c6a7eaee81c8295", _CORPUS),
    PrecisionProject("megatron-core", "0.16.1", "pretrain",
                     "megatron_core-0.16.1-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
                     "38f6bef63cd4ebc4c39c1eccbaf578596accba5c47d012faffa0670913aec131",
                     "Megatron-LM launchers in the docs/benchmarks.md launcher run"),
    PrecisionProject("liger-kernel", "0.8.5", "pretrain", "liger_kernel-0.8.5.tar.gz",
                     "4e8f8f611a8ad735c37c989410d09820bb08881f131851a3967c34baa7889d66",
                     "read for NPU926 (docs/llm-stack.md)"),
    PrecisionProject("torchtitan", "0.3.0", "pretrain", "torchtitan-0.3.0.tar.gz",
                     "6351b2dc6cdd8bdad15cd2ce5d9520e391a75b584770d2ebd925cc3321cd1b47", _ISSUE35),
    PrecisionProject("nanotron", "0.4", "pretrain", "nanotron-0.4.tar.gz",
                     "7ea378eb1b6b16c93a3021fcfd71dd73bd14d826126eae215e2b02e05cd6a120"),
    PrecisionProject("mosaicml", "0.32.1", "pretrain", "mosaicml-0.32.1.tar.gz",
                     "417c8aa574e22d39368a434eec0800268b275cb1cc2c8af8bc187475da4953d3"),
    # diffusion
    PrecisionProject("diffusers", "0.42.1", "diffusion", "diffusers-0.42.1.tar.gz",
                     "ce855ab670c8cd1c7a61be8f12fbc68c081bca8ec5e747273946d8d6c2aff23b", _CORPUS),
    # vision
    PrecisionProject("timm", "1.0.31", "vision", "timm-1.0.31-py3-none-any.whl",
                     "5bd50f7d0fe6d09bf9285ac2523234a1b7e6bf075c0be3e7aed09139fcb617c7", _CORPUS),
    PrecisionProject("ultralytics", "8.4.190", "vision", "ultralytics-8.4.190.tar.gz",
                     "c7a0ebb21d10f1de98682b6a4dc22bc0d1d0634b9398c086bd03b1e5bf40cbc3", _CORPUS),
    PrecisionProject("open_clip_torch", "3.3.0", "vision", "open_clip_torch-3.3.0-py3-none-any.whl",
                     "c549ad5ed6bfc119cc11105033c0a2b9d7a2a4afeb40a58a09aab3da1a0043ce"),
    PrecisionProject("kornia", "0.9.0", "vision", "kornia-0.9.0-py3-none-any.whl",
                     "7a1632fe004a305c94f2b979fc6ab4df26e01f925e74bdb9f8b8a03a1229caaf"),
    PrecisionProject("mmpretrain", "1.2.0", "vision", "mmpretrain-1.2.0.tar.gz",
                     "bb3e975c62db8ca7d2d4a02ac63587c45ec067eeb0c4803e4a87aab8883ff19c"),
]

#: Repositories labelled on a seeded random sample rather than in full:
#: name -> (seed, hunks in the sample). The sample is drawn from the run's hunks
#: sorted by (file, key), so it is the same on every machine for the same output.
SAMPLES: dict[str, tuple[int, int]] = {
    "axolotl": (35, 150),
    "torchrl": (35, 100),
    "liger-kernel": (35, 100),
    "megatron-core": (35, 100),
    "unsloth": (35, 100),
    # 1,211 hunks at 68e6a29 (the CPU-path guard changed every import hunk's key): a sample
    "xtuner": (35, 150),
}

#: Files larger than this are not unpacked (data blobs, vendored binaries).
MAX_FILE_BYTES = 4 * 1024 * 1024


# --------------------------------------------------------------------------- fetching

def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(project: PrecisionProject, dest: Path) -> Path:
    """The pinned artifact in ``dest`` (downloaded if missing), its sha256 checked."""
    dest.mkdir(parents=True, exist_ok=True)
    final = dest / project.artifact
    if not final.is_file():
        with tempfile.TemporaryDirectory(dir=dest) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                   "-q", "-d", tmp, *project.pip_args(), f"{project.name}=={project.version}"]
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900)
            got = Path(tmp) / project.artifact
            if proc.returncode != 0 or not got.is_file():
                names = sorted(p.name for p in Path(tmp).iterdir())
                raise CorpusError(f"pip download {project.name}=={project.version} did not give "
                                  f"{project.artifact} (got {names}): {proc.stderr.strip()[-300:]}")
            shutil.move(str(got), final)
    actual = _sha256(final)
    if actual != project.sha256:
        final.unlink()
        raise CorpusError(f"{project.artifact}: sha256 {actual} != pinned {project.sha256}")
    return final


def _members(artifact: Path):
    """(relative path, reader) for every regular file of an sdist or wheel; an sdist's
    top directory is stripped."""
    if artifact.name.endswith(".whl") or artifact.name.endswith(".zip"):
        with zipfile.ZipFile(artifact) as archive:
            for info in archive.infolist():
                if info.is_dir() or info.file_size > MAX_FILE_BYTES:
                    continue
                parts = PurePosixPath(info.filename).parts
                if artifact.name.endswith(".zip"):
                    parts = parts[1:]
                if not parts or ".." in parts:
                    continue
                yield PurePosixPath(*parts).as_posix(), (lambda i=info: archive.read(i))
    else:
        with tarfile.open(artifact) as archive:
            for member in archive.getmembers():
                parts = PurePosixPath(member.name).parts
                if not member.isfile() or member.size > MAX_FILE_BYTES or len(parts) < 2 or ".." in parts:
                    continue
                handle = archive.extractfile(member)
                if handle is not None:
                    yield PurePosixPath(*parts[1:]).as_posix(), handle.read


def ensure_tree(project: PrecisionProject, cache_dir: Path | None = None) -> Path:
    """The unpacked tree of ``project`` in the cache (fetched and unpacked if missing)."""
    cache = (Path(cache_dir) if cache_dir else default_cache_dir()) / "precision"
    root = cache / "src" / project.label
    stamp = root / ".precision.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("sha256") == project.sha256:
        return root
    artifact = download(project, cache / "dl")
    staging = Path(tempfile.mkdtemp(prefix=f".{project.name}-", dir=cache))
    try:
        count = 0
        for rel, read in _members(artifact):
            out = staging / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(read())
            count += 1
        (staging / ".precision.json").write_text(json.dumps(
            {"artifact": project.artifact, "sha256": project.sha256, "files": count}))
        if root.exists():
            shutil.rmtree(root)
        root.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return root


# --------------------------------------------------------------------------- hunks

@dataclass
class Hunk:
    file: str                 # path relative to the repository root, posix
    old_start: int            # first removed line (1-based); for an insertion, the line after it
    removed: list[str]
    added: list[str]
    before: list[str] = field(default_factory=list)   # up to 3 context lines above
    after: list[str] = field(default_factory=list)    # up to 3 context lines below
    rules: list[str] = field(default_factory=list)
    repo: str = ""

    @property
    def key(self) -> str:
        return hunk_key(self.file, self.removed, self.added)

    def text(self) -> str:
        return "".join(f"{sign}{line}\n" for sign, lines in
                       ((" ", self.before), ("-", self.removed), ("+", self.added), (" ", self.after))
                       for line in lines)


def hunk_key(file: str, removed: list[str], added: list[str]) -> str:
    """A stable key: the file's path and the hunk's removed and added lines, no positions."""
    payload = "\0".join([file, *("-" + line for line in removed), *("+" + line for line in added)])
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _strip_path(raw: str) -> str:
    path = raw.split("\t", 1)[0].strip()
    for prefix in ("a/", "b/"):
        if path.startswith(prefix):
            path = path[len(prefix):]
            break
    return path.removeprefix("./")


def split_diff(text: str) -> list[Hunk]:
    """Split a unified diff into hunks: one per run of consecutive ``-``/``+`` lines.

    Lines outside ``---``/``+++``/``@@`` blocks (findings, summaries) are ignored; a
    block's length is taken from its ``@@`` header, so a finding line that happens
    to start with ``-`` or a space never joins it."""
    import re

    header = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
    lines = text.splitlines()
    hunks: list[Hunk] = []
    path = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            new = _strip_path(lines[i + 1][4:])
            old = _strip_path(line[4:])
            path = new if new != "/dev/null" else old
            i += 2
            continue
        match = header.match(line)
        if not match or path is None:
            i += 1
            continue
        old_line = int(match.group(1))
        old_left = int(match.group(2)) if match.group(2) is not None else 1
        new_left = int(match.group(4)) if match.group(4) is not None else 1
        if old_left == 0:
            old_line += 1  # "-N,0": the insertion goes after line N
        i += 1
        context: list[str] = []
        current: Hunk | None = None
        while i < len(lines) and (old_left > 0 or new_left > 0):
            body = lines[i]
            i += 1
            if body.startswith("\\"):
                continue
            sign, content = (body[:1] or " "), body[1:]
            if sign == " ":
                if current is not None:
                    current.after.append(content)
                    if len(current.after) >= 3:
                        current = None
                context.append(content)
                old_left -= 1
                new_left -= 1
                old_line += 1
                continue
            if current is None or current.after:
                current = Hunk(path, old_line, [], [], before=context[-3:])
                hunks.append(current)
            if sign == "-":
                current.removed.append(content)
                old_left -= 1
                old_line += 1
            else:
                current.added.append(content)
                new_left -= 1
    return hunks


def attribute_rules(hunks: list[Hunk], report: dict) -> None:
    """Give each hunk the rules whose fixes (in the report, original positions) touch
    its removed lines, or for an insertion the lines on either side; else the
    nearest fix of the file."""
    fixes: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for entry in report.get("files", []):
        path = Path(entry["path"]).as_posix().removeprefix("./")
        for fix in entry.get("fixes") or []:
            start = (fix.get("start") or {}).get("line") or 1
            end = (fix.get("end") or {}).get("line") or start
            fixes[path].append((start, end, fix.get("rule", "?"), fix.get("message") or ""))
    for hunk in hunks:
        candidates = fixes.get(hunk.file, [])
        if hunk.removed:
            lo, hi = hunk.old_start, hunk.old_start + len(hunk.removed) - 1
        else:
            lo, hi = hunk.old_start - 1, hunk.old_start
        rules = {rule for start, end, rule, _ in candidates if start <= hi and end >= lo}
        if not rules and not hunk.removed:
            # an insertion placed away from its fix (an import below the file's other
            # imports): the fix whose message quotes what was inserted
            added = "\n".join(hunk.added)
            rules = {rule for _, _, rule, message in candidates
                     if any(token and token in added for token in message.split("`")[1::2])}
        if not rules and candidates:
            best = min(abs(start - lo) for start, _, _, _ in candidates)
            rules = {rule for start, _, rule, _ in candidates if abs(start - lo) == best}
        hunk.rules = sorted(rules) or ["?"]


def migrate(root: Path, jobs: int) -> tuple[list[Hunk], dict, int, str]:
    """Run npu-migrate (dry run) on ``root`` as a user would: ``npu-migrate .`` there."""
    with tempfile.TemporaryDirectory(prefix="npu-precision-") as tmp:
        report_path = Path(tmp) / "report.json"
        cmd = [*npu_migrate_cmd(), ".", "--diff", "-q", "--color", "never", "--no-cache",
               "--jobs", str(jobs), "--report", str(report_path)]
        proc = subprocess.run(cmd, check=False, cwd=root, capture_output=True, text=True, errors="surrogateescape")
        report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.is_file() else {}
    hunks = split_diff(proc.stdout)
    attribute_rules(hunks, report)
    return hunks, report, proc.returncode, proc.stderr


# --------------------------------------------------------------------------- labels

def load_labels(path: Path = LABELS_FILE) -> dict[tuple[str, str, str], dict]:
    """Labels by (repo, file, key). A malformed line is an error naming file:line."""
    labels: dict[tuple[str, str, str], dict] = {}
    if not path.is_file():
        return labels
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if entry["label"] not in LABELS:
                raise ValueError(f"label {entry['label']!r} is not one of {', '.join(LABELS)}")
            labels[(entry["repo"], entry["file"], entry["key"])] = entry
        except (ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"{path}:{number}: bad label line: {exc}") from None
    return labels


def lookup(labels: dict, hunk: Hunk) -> dict | None:
    return labels.get((hunk.repo, hunk.file, hunk.key))


def in_sample(repo: str, hunks: list[Hunk]) -> set[int]:
    """Indices (into ``hunks``) of the hunks of ``repo`` that its recorded sample holds."""
    if repo not in SAMPLES:
        return set(range(len(hunks)))
    seed, size = SAMPLES[repo]
    order = sorted(range(len(hunks)), key=lambda i: (hunks[i].file, hunks[i].key, hunks[i].old_start))
    return set(random.Random(seed).sample(order, min(size, len(order))))


# --------------------------------------------------------------------------- figures

COLUMNS = ("hunks", "correct", "needless", "wrong", "unlabelled")


def tally(rows: list[tuple[PrecisionProject, Hunk, str]]) -> dict[str, Counter]:
    """Counters by group: 'all', 'tuning', 'held-out', 'kind:K', 'repo:R', 'rule:X',
    'rule:X:tuning' / 'rule:X:held-out'. A hunk with several rules counts under each."""
    out: dict[str, Counter] = defaultdict(Counter)
    for project, hunk, status in rows:
        split = "tuning" if project.tuning else "held-out"
        groups = ["all", split, f"kind:{project.kind}", f"kind:{project.kind}:{split}", f"repo:{project.name}"]
        for rule in hunk.rules:
            groups += [f"rule:{rule}", f"rule:{rule}:{split}"]
        for group in groups:
            out[group]["hunks"] += 1
            out[group][status] += 1
    return out


def _pct(counter: Counter, column: str) -> str:
    labelled = sum(counter[c] for c in LABELS)
    return f"{100.0 * counter[column] / labelled:.1f} %" if labelled else "n/a"


def _cells(counter: Counter) -> list[object]:
    return [counter["hunks"], counter["correct"], counter["needless"], counter["wrong"],
            counter["unlabelled"], _pct(counter, "needless"), _pct(counter, "wrong")]


HEADER = ["hunks", "correct", "needless", "wrong", "unlabelled", "needless %", "wrong %"]


def render(projects: list[PrecisionProject], counts: dict[str, Counter], outside: Counter,
           rc: dict[str, int]) -> str:
    parts = ["### Per repository", ""]
    rows = []
    for project in projects:
        c = counts.get(f"repo:{project.name}", Counter())
        note = f"sample seed {SAMPLES[project.name][0]}, {outside[project.name]} outside" \
            if project.name in SAMPLES else ""
        rows.append([project.label, project.kind, "tuning" if project.tuning else "held-out",
                     *_cells(c), note or (f"exit {rc[project.name]}" if rc.get(project.name, 0) not in (0, 1) else "")])
    parts.append(markdown_table(["repository", "kind", "set", *HEADER, "note"], rows))
    parts += ["", "### Per kind and set", ""]
    rows = []
    for kind in sorted({p.kind for p in projects}):
        for split in ("tuning", "held-out"):
            c = counts.get(f"kind:{kind}:{split}")
            if c:
                rows.append([kind, split, *_cells(c)])
    for split in ("tuning", "held-out"):
        rows.append([f"**{split}**", "", *_cells(counts.get(split, Counter()))])
    rows.append(["**all**", "", *_cells(counts.get("all", Counter()))])
    parts.append(markdown_table(["kind", "set", *HEADER], rows))
    parts += ["", "### Per rule (a hunk with several rules counts under each)", ""]
    rows = []
    rules = sorted({g.split(":")[1] for g in counts if g.startswith("rule:")})
    for rule in rules:
        c = counts[f"rule:{rule}"]
        t = counts.get(f"rule:{rule}:tuning", Counter())
        h = counts.get(f"rule:{rule}:held-out", Counter())
        rows.append([rule, *_cells(c), f"{t['wrong']}/{t['needless']}", f"{h['wrong']}/{h['needless']}"])
    parts.append(markdown_table(["rule", *HEADER, "tuning wrong/needless", "held-out wrong/needless"], rows))
    return "\n".join(parts)


def show(hunk: Hunk, stream, entry: dict | None = None) -> None:
    print(f"=== {hunk.repo} {hunk.file}:{hunk.old_start} key={hunk.key} rules={','.join(hunk.rules)}",
          file=stream)
    if entry:
        print(f"    {entry['label']}: {entry.get('reason', '')}", file=stream)
    stream.write(hunk.text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--projects", help="comma-separated subset of the project names")
    ap.add_argument("--cache-dir", type=Path)
    ap.add_argument("--labels", type=Path, default=LABELS_FILE)
    ap.add_argument("--jobs", type=int, default=2, help="npu-migrate --jobs (default 2)")
    ap.add_argument("--show-unlabelled", action="store_true", help="print every unlabelled hunk")
    ap.add_argument("--show", choices=LABELS, help="print every hunk with this label")
    ap.add_argument("--fail-on-unlabelled", action="store_true", help="exit 1 if any hunk is unlabelled")
    ap.add_argument("--template", type=Path, help="write JSONL stubs for the unlabelled hunks")
    ap.add_argument("--json", type=Path, help="write every hunk with its label as JSON")
    ap.add_argument("--output", type=Path, help="also write the tables (markdown) here")
    ap.add_argument("--strict", action="store_true", help="fail when a project cannot be fetched")
    ap.add_argument("--from-json", type=Path, nargs="+", metavar="FILE",
                    help="read the hunks of earlier --json runs instead of running npu-migrate "
                         "(recount after labelling; the figures are those of the engine that wrote FILE)")
    args = ap.parse_args(argv)

    labels = load_labels(args.labels)
    wanted = set(args.projects.split(",")) if args.projects else None
    projects = [p for p in PROJECTS if wanted is None or p.name in wanted]
    if wanted and len(projects) != len(wanted):
        unknown = wanted - {p.name for p in PROJECTS}
        print(f"error: unknown project(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2

    rows: list[tuple[PrecisionProject, Hunk, str]] = []
    unlabelled: list[Hunk] = []
    outside: Counter = Counter()
    shown: list[Hunk] = []
    dump = []
    rc: dict[str, int] = {}
    done = []
    previous: dict[str, list[Hunk]] | None = None
    if args.from_json:
        previous = defaultdict(list)
        for path in args.from_json:
            for entry in json.loads(Path(path).read_text(encoding="utf-8")):
                previous[entry["repo"]].append(Hunk(entry["file"], entry["line"], entry["removed"],
                                                    entry["added"], rules=entry["rules"]))
    for project in projects:
        if previous is not None:
            if project.name not in previous:
                continue
            hunks = previous[project.name]
            done.append(project)
        else:
            try:
                root = ensure_tree(project, args.cache_dir)
            except (CorpusError, OSError, tarfile.TarError, zipfile.BadZipFile, subprocess.TimeoutExpired) as exc:
                if args.strict:
                    print(f"error: {exc}", file=sys.stderr)
                    return 2
                print(f"warning: skipping {project.label}: {exc}", file=sys.stderr)
                continue
            print(f"running npu-migrate on {project.label} ...", file=sys.stderr, flush=True)
            hunks, _report, code, stderr = migrate(root, args.jobs)
            rc[project.name] = code
            if code not in (0, 1):
                print(f"warning: npu-migrate exited {code} on {project.label}: {stderr.strip()[-300:]}",
                      file=sys.stderr)
            done.append(project)
        # a JSON dump holds only the hunks its run counted (the sample and the labelled
        # ones): drawing the sample again from that subset would pick other hunks
        sample = set(range(len(hunks))) if previous is not None else in_sample(project.name, hunks)
        for index, hunk in enumerate(hunks):
            hunk.repo = project.name
            entry = lookup(labels, hunk)
            if entry is None and index not in sample:
                outside[project.name] += 1
                continue
            status = entry["label"] if entry else "unlabelled"
            rows.append((project, hunk, status))
            if entry is None:
                unlabelled.append(hunk)
            elif args.show == status:
                shown.append(hunk)
            dump.append({"repo": project.name, "version": project.version, "file": hunk.file,
                         "line": hunk.old_start, "key": hunk.key, "rules": hunk.rules, "label": status,
                         "reason": (entry or {}).get("reason", ""), "removed": hunk.removed,
                         "added": hunk.added})
        if args.json:  # after each project, so a long run can be read while it goes on
            args.json.write_text(json.dumps(dump, indent=1), encoding="utf-8")

    counts = tally(rows)
    text = render(done, counts, outside, rc)
    print(text)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1), encoding="utf-8")
    for hunk in shown:
        show(hunk, sys.stdout, lookup(labels, hunk))
    if args.show_unlabelled:
        for hunk in unlabelled:
            show(hunk, sys.stdout)
    if args.template:
        version = {p.name: p.version for p in PROJECTS}
        with open(args.template, "w", encoding="utf-8") as handle:
            for hunk in unlabelled:
                handle.write(json.dumps({"repo": hunk.repo, "version": version[hunk.repo], "file": hunk.file,
                                         "key": hunk.key, "label": "", "rules": hunk.rules,
                                         "reason": ""}) + "\n")
    if unlabelled:
        bar = "!" * 72
        print(f"\n{bar}\n{len(unlabelled)} UNLABELLED HUNK(S): nobody has read them; the figures above do "
              f"not cover them.\nRun with --show-unlabelled to read them, --template FILE for stubs.\n{bar}",
              file=sys.stderr)
        if args.fail_on_unlabelled:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
