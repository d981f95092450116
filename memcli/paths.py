"""Where mem keeps its data and caches (platformdirs), and how the database path is chosen."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import platformdirs

APP_NAME = "mem"


def data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def cache_dir() -> Path:
    """Model and tokenizer caches. MEM_CACHE_DIR overrides (tests, read-only homes)."""
    override = os.environ.get("MEM_CACHE_DIR")
    if override:
        return Path(override)
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def resolve_db_path(cli_value: str | os.PathLike | None) -> Path:
    """--db PATH, else $MEM_DB, else <user data dir>/mem.db."""
    if cli_value:
        return Path(cli_value).expanduser()
    env = os.environ.get("MEM_DB")
    if env:
        return Path(env).expanduser()
    return data_dir() / "mem.db"


def temp_path_beside(dest: Path) -> Path:
    """A fresh hidden name in dest's folder (same file system, so a rename is atomic)."""
    return dest.with_name(f".{dest.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def write_atomically(
    dest: Path, write: Callable[[Path], None], *, mode: int | None = None, parents: bool = True
) -> Path:
    """Run write(tmp) on a temp file beside dest, fsync it and rename it to dest, so readers
    (and concurrent writers) never see a partial file and a failure leaves dest as it was.
    `mode` creates the temp file with those permissions first (0o600 for a file that holds
    memories); `parents` makes dest's missing folders."""
    if parents:
        dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path_beside(dest)
    try:
        if mode is not None:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest
