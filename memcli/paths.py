"""Where mem keeps its data and caches (platformdirs), and how the database path is chosen."""

from __future__ import annotations

import os
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
