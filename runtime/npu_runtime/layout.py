"""The checkpoint directory: names, publishing a finished checkpoint, pruning.

::

    step-0000000500/        a complete checkpoint (never visible half-written)
    step-0000000500.1/      the same step saved again, while it replaces step-0000000500
    latest                  "step-0000000500\\n" (for people and scripts; never read back)
    .tmp-step-...           a save in progress, or one killed mid-way
    .trash-...              a checkpoint being deleted

Every change to what is visible is one ``rename``: a kill at any moment leaves every
complete checkpoint that was visible before, or its replacement, visible. Deleting is
a rename to ``.trash-*`` followed by removal on a background thread (removing a large
checkpoint can take as long as writing one); a removal cut short by exit is finished
by the next save.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
from collections.abc import Callable

from . import durable

LATEST = "latest"
TMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
_STEP_RE = re.compile(r"^step-(\d+)(?:\.(\d+))?$")


def step_dirname(step: int, generation: int = 0) -> str:
    name = f"step-{step:010d}"
    return f"{name}.{generation}" if generation else name


def parse_name(name: str) -> tuple[int, int] | None:
    """(step, generation) of a checkpoint directory name, else None."""
    m = _STEP_RE.match(name)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def listing(directory: str) -> list[tuple[int, int, str]]:
    """(step, generation, name) of visible checkpoint directories, newest first."""
    out = []
    for name in os.listdir(directory):
        key = parse_name(name)
        if key and os.path.isdir(os.path.join(directory, name)):
            out.append((*key, name))
    return sorted(out, reverse=True)


_removals: list[threading.Thread] = []


def _remove_later(path: str) -> None:
    thread = threading.Thread(target=shutil.rmtree, args=(path, True), name="npu_runtime-prune", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # the interpreter is shutting down: remove it now
        shutil.rmtree(path, ignore_errors=True)
        return
    _removals.append(thread)


def settle() -> None:
    """Wait for the background removals started so far."""
    while _removals:
        _removals.pop().join()


def _discard(directory: str, name: str, tag: str) -> None:
    """Make ``name`` disappear atomically (rename), then delete it in the background."""
    trash = os.path.join(directory, f"{TRASH_PREFIX}{name}-{tag}")
    try:
        os.replace(os.path.join(directory, name), trash)
    except OSError:
        return
    _remove_later(trash)


def publish(directory: str, tmp: str, step: int, tag: str) -> str:
    """Rename the finished ``tmp`` into place as checkpoint ``step``; returns its name.

    Saving a step that already exists: the new one becomes visible under the next
    generation (``step-N.g``, preferred by loading) before the old one is renamed away,
    and only then takes the plain name.
    """
    final = step_dirname(step)
    same = [(g, name) for s, g, name in listing(directory) if s == step]
    if not same:
        os.replace(tmp, os.path.join(directory, final))
        return final
    interim = step_dirname(step, max(g for g, _ in same) + 1)
    os.replace(tmp, os.path.join(directory, interim))
    durable.fsync_dir(directory)
    for _g, name in same:
        _discard(directory, name, tag)
    os.replace(os.path.join(directory, interim), os.path.join(directory, final))
    return final


def prepare_latest(directory: str, name: str, tag: str) -> str:
    """Write the next ``latest`` beside it (to be synced, then renamed into place)."""
    tmp = os.path.join(directory, f"{TMP_PREFIX}{LATEST}-{tag}")
    durable.write_text(tmp, name + "\n")
    return tmp


def install_latest(directory: str, prepared: str) -> None:
    os.replace(prepared, os.path.join(directory, LATEST))


def read_latest(directory: str) -> str | None:
    try:
        with open(os.path.join(directory, LATEST), encoding="utf-8") as fh:
            return fh.read().strip() or None
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def prune(directory: str, keep: int, is_good: Callable[[str], bool], tag: str,
          spare: Callable[[str], bool] = lambda name: False) -> list[str]:
    """Keep the ``keep`` newest checkpoints known to be good, and everything newer
    than the oldest of them; delete what is older. Checkpoints never verified, or found
    corrupt, do not count: a verified checkpoint is never deleted in favour of them.
    Leftover ``.tmp-*``/``.trash-*`` entries (killed saves) go too, except ``spare``."""
    removed = []
    good = 0
    for _step, _gen, name in listing(directory):
        if good >= keep:
            _discard(directory, name, tag)
            removed.append(name)
        elif is_good(name):
            good += 1
    for name in os.listdir(directory):
        if name.startswith((TMP_PREFIX, TRASH_PREFIX)) and not spare(name):
            full = os.path.join(directory, name)
            if os.path.isdir(full) and not os.path.islink(full):
                if name.startswith(TMP_PREFIX):  # hide it first: a stale save never looks current
                    hidden = os.path.join(directory, f"{TRASH_PREFIX}{name}-{tag}")
                    with contextlib.suppress(OSError):
                        os.replace(full, hidden)
                        full = hidden
                _remove_later(full)
            else:
                with contextlib.suppress(OSError):
                    os.remove(full)
    return removed
