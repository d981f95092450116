"""Where mem keeps its data and caches (platformdirs), and how the database path is chosen."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

APP_NAME = "mem"


def data_dir() -> Path:
    import platformdirs  # here, not at import: the CLI's start-up needs only file_identity

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def cache_dir() -> Path:
    """Model and tokenizer caches. MEM_CACHE_DIR overrides (tests, read-only homes)."""
    override = os.environ.get("MEM_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def file_identity(fd_or_path: int | str | os.PathLike) -> tuple[int, int, int] | None:
    """(device, inode, rdev) of an open file descriptor or of the file at a path; None when
    there is none. Tells whether a path still names the file it named before."""
    try:
        st = os.fstat(fd_or_path) if isinstance(fd_or_path, int) else os.stat(fd_or_path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_rdev


STORE_SIBLINGS = ("-wal", "-shm", "-journal")  # the files SQLite keeps beside a store


def is_store_file(candidate: str | os.PathLike, db: str | os.PathLike) -> bool:
    """Whether candidate is the store at db or one of SQLite's files beside it, by device
    and inode (a hard link or another spelling of the path counts). A process that holds a
    connection must never open and close these outside SQLite: closing any descriptor of a
    file drops the locks SQLite holds on it (memcli/store/base.py, read_header)."""
    here = file_identity(candidate)
    if here is None:
        return False
    return any(file_identity(f"{db}{end}") == here for end in ("", *STORE_SIBLINGS))


def store_location_problem(value: str | os.PathLike) -> str | None:
    """What is wrong with a store location, or None: a URL is never taken for a path (a
    postgresql:// store made a folder named "postgresql:" with a SQLite store inside)."""
    import re

    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", os.fspath(value))
    if scheme:
        return (
            f"{scheme[1]}:// stores are not supported by this mem: give the path of a SQLite file"
        )
    return None


def resolve_db_path(cli_value: str | os.PathLike | None) -> Path:
    """--db PATH, else $MEM_DB, else <user data dir>/mem.db. ValueError for a URL."""
    if cli_value:
        problem = store_location_problem(cli_value)
        if problem:
            raise ValueError(problem)
        return Path(cli_value).expanduser()
    env = os.environ.get("MEM_DB")
    if env:
        return Path(env).expanduser()
    return data_dir() / "mem.db"


def temp_path_beside(dest: Path) -> Path:
    """A fresh hidden name in dest's folder (same file system, so a rename is atomic)."""
    import uuid

    return dest.with_name(f".{dest.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def lock_held(path: Path, *, if_unopenable: bool = True) -> bool:
    """Whether another open file description holds an flock on path: a writer at work (a
    process id alone could be another namespace's or another host's). A file that cannot be
    opened (gone, or not ours) counts as if_unopenable says."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return if_unopenable
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _abandoned_temps(dest: Path) -> list[Path]:
    """write_atomically's temp files beside dest whose writer is gone (killed: kill -9 left
    a hidden file as big as an export beside it). A writer holds an flock on its temp file
    until the rename, so one whose lock anyone can take is abandoned. Regular files only:
    a folder or a fifo of that name is not ours."""
    import re

    pattern = re.compile(rf"^\.{re.escape(dest.name)}\.\d+\.[0-9a-f]{{8}}\.tmp$")
    try:
        names = [p for p in dest.parent.iterdir() if pattern.match(p.name)]
    except OSError:
        return []
    return [
        path for path in names if path.is_file() and not path.is_symlink() and not lock_held(path)
    ]


def write_atomically(
    dest: Path, write: Callable[[Path], None], *, mode: int | None = None, parents: bool = True
) -> Path:
    """Run write(tmp) on a temp file beside dest, fsync it and rename it to dest, so readers
    (and concurrent writers) never see a partial file and a failure leaves dest as it was.
    `mode` creates the temp file with those permissions first (0o600 for a file that holds
    memories); `parents` makes dest's missing folders."""
    import fcntl

    if parents:
        dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in _abandoned_temps(dest):
        try:
            stale.unlink()
        except OSError:
            pass  # gone meanwhile, or not ours to remove
    tmp = temp_path_beside(dest)
    lock = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held until the rename (_abandoned_temps)
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(lock)
    return dest
