"""The fault suite (issue 30): no acknowledged write is ever lost.

python scripts/faults.py [--runs 240] [--seed 1] [--quick] [--kinds kill9,sigint,...]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Unavailable(Exception):
    """A fault this machine cannot make (a mount without root)."""


def is_root() -> bool:
    return os.geteuid() == 0


@contextmanager
def tmpfs(size_bytes: int, parent: Path | None = None) -> Iterator[Path]:
    """A fresh tmpfs of this size (root only), unmounted and removed afterwards."""
    if not is_root():
        raise Unavailable("mounting a tmpfs needs root")
    mountpoint = Path(tempfile.mkdtemp(prefix="mem-faults-tmpfs-", dir=parent))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        mountpoint.rmdir()
        raise Unavailable(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)
        try:
            mountpoint.rmdir()
        except OSError:
            pass


def _chattr(flag: str, *paths: Path) -> bool:
    done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True)
    return done.returncode == 0


@contextmanager
def read_only_media(folder: Path, how: str) -> Iterator[Path]:
    """The store folder/mem.db where nothing can be written; yields the store's path there.

    how "mount": a copy of the folder's files on a tmpfs remounted read-only (root only);
    "folder": the folder and its files themselves made unwritable: the immutable attribute
    for root (whom mode bits do not stop), mode bits (0555, 0444) for anyone else."""
    if how == "mount":
        with tmpfs(64 << 20) as mountpoint:
            for entry in folder.iterdir():
                shutil.copy2(entry, mountpoint / entry.name)
            done = subprocess.run(
                ["mount", "-o", "remount,ro", str(mountpoint)], capture_output=True, text=True
            )
            if done.returncode != 0:
                raise Unavailable(f"cannot remount read-only: {done.stderr.strip()}")
            yield mountpoint / "mem.db"
        return
    if how != "folder":
        raise ValueError(how)
    files = sorted(folder.iterdir())
    if is_root():
        if not _chattr("+i", folder, *files):
            _chattr("-i", folder, *files)
            raise Unavailable("chattr +i is not supported here")
        try:
            yield folder / "mem.db"
        finally:
            _chattr("-i", folder, *files)
        return
    modes = {p: p.stat().st_mode & 0o7777 for p in [folder, *files]}
    for p in files:
        p.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield folder / "mem.db"
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


# A process whose files may grow by no more than RLIMIT_FSIZE bytes: the full disk of a
# machine where a tmpfs cannot be mounted (not root). SQLite's writes past it fail with
# EFBIG, as on a full disk with ENOSPC (Python ignores the SIGXFSZ that comes with them).
FSIZE_PREFIX = (
    "import resource, sys; limit = int(sys.argv.pop(1)); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
    "sys.argv[0] = 'mem'; from memcli.cli import main; main()"
)


def mem_argv(db: Path, *args: str, fsize: int | None = None) -> list[str]:
    """The command line of `mem --db DB ARGS` (its files bounded to fsize bytes if given)."""
    import sys

    if fsize is not None:
        return [sys.executable, "-c", FSIZE_PREFIX, str(fsize), "--db", str(db), *args]
    return [sys.executable, "-m", "memcli", "--db", str(db), *args]


def fill(folder: Path) -> None:
    """Take every free byte of the file system holding folder (a file named .filler)."""
    fd = os.open(folder / ".filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 65536, 4096, 512, 1):
            block = b"\0" * size
            try:
                while os.write(fd, block) == size:
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
