"""The scratch copies of the user's project (nothing is ever written into the original).

A copy is a sandbox for what the twins write through the project's own paths: no
name in it leads out of the scratch directory.

* a symbolic link whose target lies inside the project becomes a *relative* link to
  the same place inside the copy (``ckpt -> /abs/proj/store`` becomes ``ckpt ->
  store``), so ``torch.save("ckpt/model.pt")`` writes into the copy;
* a link that leaves the project is replaced by a copy of its target (a file's
  bytes, a directory's tree under the same rules), up to ``EXTERNAL_LIMIT`` bytes
  per copy in all (each entry below a directory counts ``ENTRY_COST`` bytes more);
  past that, verify refuses with one line (``ScratchError``);
* a dangling link that leaves the project, and special files (FIFOs, sockets,
  devices), are left out with a note: reading a FIFO would block, and writing
  through the link would create a file outside;
* a link into a kernel pseudo file system (``/proc``, ``/sys``, ``/dev``, debugfs,
  cgroups...: ``PSEUDO_FS``, found by device number in ``/proc/self/mountinfo``) is left
  out with a note: its "files" are not data (``/proc/kmsg`` blocks a reader forever and
  consumes the kernel's log, ``/proc/self/mem`` fails, ``/proc/kcore`` claims 128 TiB);
* the bytes read through links that leave the project are counted as they are read,
  not by the size a file reports (a pseudo file reports 0);
* version control, environments and caches (``SKIP_DIRS``) are not copied.

Only names are confined: a script that writes to an absolute path of its own
(``/home/me/proj/out``, ``~/.cache``) still does; see docs/verify.md.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

#: Directories never copied: version control, environments, caches.
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", "env", ".tox", ".nox", "node_modules", "__pycache__",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".npu_migrate_cache", ".ipynb_checkpoints",
})

#: Bytes copied from the targets of links that leave the project, per copy.
EXTERNAL_LIMIT = 1 << 30
#: What each file, directory or link below such a target counts against it besides its
#: bytes (a block): an outside directory of a million empty files took a minute per copy.
ENTRY_COST = 4096

#: File systems whose files are the kernel's interfaces, not data: never copied.
PSEUDO_FS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "debugfs", "tracefs", "securityfs", "configfs", "cgroup", "cgroup2",
    "pstore", "bpf", "efivarfs", "fusectl", "binfmt_misc", "mqueue", "autofs", "rpc_pipefs", "nsfs", "selinuxfs",
    "hugetlbfs",
})


def _pseudo_devices() -> frozenset[int]:
    """Device numbers of the mounted ``PSEUDO_FS`` file systems (``/proc/self/mountinfo``:
    the third field is major:minor, the type follows the `` - `` separator)."""
    devices = set()
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields, _, after = line.partition(" - ")
                fields, after = fields.split(), after.split()
                if len(fields) < 3 or not after:
                    continue
                fstype = after[0]
                major, _, minor = fields[2].partition(":")
                if fstype in PSEUDO_FS and major.isdigit() and minor.isdigit():
                    devices.add(os.makedev(int(major), int(minor)))
    except OSError:
        pass
    for path in ("/proc", "/sys", "/dev"):  # also without a readable mountinfo
        try:
            st = os.stat(path)
        except OSError:
            continue
        if path != "/dev" or st.st_dev != os.stat("/").st_dev:  # /dev on the root file system is a plain directory
            devices.add(st.st_dev)
    return frozenset(devices)


class ScratchError(Exception):
    """The project cannot be copied safely (one line)."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class _Copier:
    def __init__(self, root: Path, dest: Path, skip: Path | None, notes: list[str] | None):
        self.root = os.path.realpath(root)
        self.dest = str(dest)
        self.skip = os.path.realpath(skip) if skip is not None else None
        # The copy being made: a link to a parent of the project (``up -> ..``) with the
        # scratch directory beside it would otherwise copy the copy into itself, without end.
        self.scratch = os.path.realpath(dest)
        self.notes = notes
        self.external = 0
        self.outside: list[str] = []  # external directories being copied (cycle guard)
        self.pseudo = _pseudo_devices()

    def note(self, message: str) -> None:
        if self.notes is not None:
            self.notes.append(message)

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.root)

    # -- entries -------------------------------------------------------------------------
    def copy_dir(self, src: str, dst: str, shown: str) -> None:
        os.makedirs(dst, exist_ok=True)
        try:
            entries = sorted(os.scandir(src), key=lambda e: e.name)
        except OSError as exc:
            self.note(f"{shown}: not copied ({exc.strerror})")
            return
        for entry in entries:
            if entry.name in SKIP_DIRS and entry.is_dir(follow_symlinks=False):
                continue
            path = os.path.join(src, entry.name)
            if self.skip is not None and os.path.realpath(path) == self.skip:
                continue
            self.copy_entry(path, os.path.join(dst, entry.name), os.path.join(shown, entry.name))
        shutil.copystat(src, dst, follow_symlinks=False)
        os.chmod(dst, stat.S_IMODE(os.lstat(dst).st_mode) | stat.S_IRWXU)  # the copy stays removable

    def copy_entry(self, src: str, dst: str, shown: str) -> None:
        try:
            st = os.lstat(src)
        except OSError as exc:
            self.note(f"{shown}: not copied ({exc.strerror})")
            return
        if stat.S_ISLNK(st.st_mode):
            self.copy_link(src, dst, shown)
        elif stat.S_ISDIR(st.st_mode):
            self.copy_dir(src, dst, shown)
        elif stat.S_ISREG(st.st_mode):
            self.copy_file(src, dst, shown, st.st_size, external=False)
        else:
            self.note(f"{shown}: {_kind(st.st_mode)}; left out of the scratch copies")

    def copy_file(self, src: str, dst: str, shown: str, size: int, external: bool) -> None:
        if external:
            self.external += size
            if self.external > EXTERNAL_LIMIT:
                raise ScratchError(self._too_much(shown))
        try:
            # O_NONBLOCK: a file replaced by a FIFO meanwhile must not block the copy.
            fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            self.note(f"{shown}: not copied ({exc.strerror})")
            return
        with os.fdopen(fd, "rb") as fin:
            if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
                self.note(f"{shown}: not a regular file; left out of the scratch copies")
                return
            with open(dst, "xb") as fout:
                if external:
                    self._copy_counted(fin, fout, shown, size)
                else:
                    shutil.copyfileobj(fin, fout, 1 << 20)
        shutil.copystat(src, dst)

    def _copy_counted(self, fin, fout, shown: str, size: int) -> None:
        """Copy an outside file, counting the bytes read against ``EXTERNAL_LIMIT`` (its
        reported ``size`` was counted already; what it yields beyond that is counted too)."""
        read = 0
        while True:
            chunk = fin.read(1 << 20)
            if not chunk:
                return
            read += len(chunk)
            if read > size:
                self.external += read - max(size, read - len(chunk))
                if self.external > EXTERNAL_LIMIT:
                    raise ScratchError(self._too_much(shown))
            fout.write(chunk)

    @staticmethod
    def _too_much(shown: str) -> str:
        return (f"{shown}: the symbolic links that leave the project lead to more than "
                f"{EXTERNAL_LIMIT >> 20} MiB (each file counted {ENTRY_COST >> 10} KiB more), which verify would "
                "copy into the scratch directory (so that "
                "the twins cannot write through them); point --project at a directory that contains "
                "their targets, or make the script take the path as an argument")

    def copy_link(self, src: str, dst: str, shown: str) -> None:
        target = os.path.realpath(src)
        if _inside(target, self.root) and not (self.skip is not None and _inside(target, self.skip)):
            # The same place inside the copy, relative: it cannot leave the copy.
            there = os.path.join(self.dest, self.rel(target))
            os.symlink(os.path.relpath(there, os.path.dirname(dst)), dst)
            return
        try:
            st = os.stat(target)
        except OSError:
            self.note(f"{shown}: a symbolic link to {os.readlink(src)}, outside the project, that leads nowhere; "
                      "left out of the scratch copies")
            return
        if st.st_dev in self.pseudo:
            self.note(f"{shown}: a symbolic link to {target}, a kernel pseudo file system (not data); "
                      "left out of the scratch copies")
            return
        if stat.S_ISDIR(st.st_mode):
            if any(_inside(target, d) for d in self.outside):
                self.note(f"{shown}: a symbolic link loop outside the project; left out of the scratch copies")
                return
            self.outside.append(target)
            try:
                self.copy_tree_external(target, dst, shown)
            finally:
                self.outside.pop()
        elif stat.S_ISREG(st.st_mode):
            self.copy_file(target, dst, shown, st.st_size, external=True)
        else:
            self.note(f"{shown}: a symbolic link to {_kind(st.st_mode)}; left out of the scratch copies")

    def copy_tree_external(self, src: str, dst: str, shown: str) -> None:
        os.makedirs(dst, exist_ok=True)
        try:
            entries = sorted(os.scandir(src), key=lambda e: e.name)
        except OSError as exc:
            self.note(f"{shown}: not copied ({exc.strerror})")
            return
        for entry in entries:
            path, out, name = entry.path, os.path.join(dst, entry.name), os.path.join(shown, entry.name)
            self.external += ENTRY_COST
            if self.external > EXTERNAL_LIMIT:
                raise ScratchError(self._too_much(name))
            if _inside(os.path.realpath(path), self.scratch):
                self.note(f"{name}: the scratch copy being made; left out of the scratch copies")
                continue
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_dev in self.pseudo:  # a pseudo file system mounted below an outside directory (/ -> /proc)
                self.note(f"{name}: a kernel pseudo file system (not data); left out of the scratch copies")
                continue
            if stat.S_ISLNK(st.st_mode):
                self.copy_link(path, out, name)
            elif stat.S_ISDIR(st.st_mode):
                self.copy_tree_external(path, out, name)
            elif stat.S_ISREG(st.st_mode):
                self.copy_file(path, out, name, st.st_size, external=True)
            else:
                self.note(f"{name}: {_kind(st.st_mode)}; left out of the scratch copies")


def copy_project(root: Path, dest: Path, skip: Path | None = None, notes: list[str] | None = None) -> Path:
    """Copy ``root`` to ``dest`` as a sandbox (see the module's docstring); ``skip``, the
    scratch directory itself when it lies inside ``root``, is left out. What was left
    out is appended to ``notes``. Raises ``ScratchError``."""
    copier = _Copier(root, dest, skip, notes)
    if os.path.lexists(dest):
        raise ScratchError(f"{dest}: exists")
    try:
        copier.copy_dir(copier.root, str(dest), "")
    except OSError as exc:  # a name too long, a full disk: one line, never a traceback
        raise ScratchError(f"{exc.filename or dest}: cannot copy the project ({exc.strerror or exc})") from None
    except RecursionError:  # the copy recurses once per level (a few hundred levels)
        raise ScratchError(f"{root}: its directories nest too deep to copy (hundreds of levels)") from None
    return dest


def escapes(copy: Path) -> list[str]:
    """Names in ``copy`` that lead out of it (none, for a copy made by copy_project)."""
    top = os.path.realpath(copy)
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) and not _inside(os.path.realpath(path), top):
                out.append(os.path.relpath(path, top))
    return out
