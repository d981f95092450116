"""Opening one mem file safely (the connection and its transactions: core.py).

A file is only ever opened for writing once it is known to be a mem store: a path that does
not exist is created whole (schema written to a private temporary file, then linked into
place, so no other process ever sees a half-made store), and an existing file must carry
mem's application id (or, for files from before it was set, mem's tables and a known schema
version). Anything else, an empty file included, is left untouched.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import apsw
import sqlite_vec

from memcli.paths import lock_held
from memcli.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from memcli.store.types import (
    BUSY_TIMEOUT_MS,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreReadOnly,
)

_MEM_TABLES = {"meta", "banks", "facts", "fact_fts"}


PAGE_CACHE_KIB = 16384


def raw_connection(path: Path, flags: int, *, immutable: bool = False) -> apsw.Connection:
    """A bare connection to path (immutable: read-only, as a file nobody can change)."""
    if immutable:
        flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        conn = apsw.Connection(f"file:{quote(str(path.resolve()))}?immutable=1", flags=flags)
    else:
        conn = apsw.Connection(str(path), flags=flags)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return conn


def set_up(conn: apsw.Connection, path: Path) -> apsw.Connection:
    """conn with sqlite-vec and the PRAGMAs every store connection runs with; closed, and
    the failure said as one line, when they fail."""
    try:
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        conn.execute("PRAGMA foreign_keys = ON")
        # 16 MiB of page cache, not SQLite's 2: reading a bank's vector chunks for the scan
        # (store/vectors.py) took 47-72 ms at 100k facts with 2 MiB and 32-38 ms with 8 MiB
        # or more (same file, same process start). Pages are only allocated as they are read.
        conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
    except apsw.Error as exc:  # the first statement reads the schema: -wal and -shm open
        system_errno = conn.system_errno
        conn.close()
        raise open_error(path, exc, system_errno) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def connect(path: Path, flags: int) -> apsw.Connection:
    return set_up(raw_connection(path, flags), path)


# The errnos of a write refused for lack of room: a full disk, a quota, the file size limit.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def open_reading(
    connect: Callable[[], apsw.Connection], path: Path, *, may_lock: bool
) -> tuple[apsw.Connection, bool]:
    """A connection made by connect() that has read the store once, and whether it holds
    the store alone (exclusive locking mode).

    A WAL connection's first read maps the -shm, the index of the log that every connection
    shares; when none has the store open, that file is created and grown to 32 KiB, which a
    full disk refuses: export, which only reads, failed with "disk I/O error". With may_lock
    such a reader is made again in exclusive locking mode, where SQLite keeps that index in
    its own memory and needs no -shm (sqlite.org/wal.html, "Use of WAL Without Shared-Memory");
    it then holds the store alone until it is closed (writers wait on their busy timeout),
    so only a short-lived reader may ask for it. Its exclusive lock needs a descriptor open
    for writing; query_only keeps it from writing. Otherwise the lack of space is StoreFull
    (open_error), as is every other failure of that first read."""
    conn = connect()
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn, False
    except apsw.Error as exc:
        system_errno = conn.system_errno
        conn.close()
        if not (may_lock and isinstance(exc, apsw.IOError) and system_errno in NO_SPACE):
            raise open_error(path, exc, system_errno) from exc
    except BaseException:
        conn.close()
        raise
    conn = raw_connection(path, apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except apsw.Error as exc:
        system_errno = conn.system_errno
        conn.close()
        raise open_error(path, exc, system_errno) from exc
    except BaseException:
        conn.close()
        raise
    return conn, True


def on_read_only_media(path: Path) -> bool:
    """Whether nothing can be written beside the store at path, so that nobody can write it:
    a WAL writer must first create the -wal in its folder (a read-only file system, a folder
    with the immutable attribute or without write permission). Such a store with no -wal is
    whole in its main file, and SQLite can only read it as immutable: a read-only connection
    still needs to create the -wal and -shm, and failed with "unable to open database file"."""
    return not os.access(path.parent, os.W_OK) and not Path(f"{path}-wal").exists()


def close_all_connections() -> None:
    """Close every SQLite connection this process has open, each as its store's close would
    (its log folded into the file): the CLI's exit skips the interpreter's shutdown."""
    for conn in apsw.connections():
        conn.close()


def is_database_error(exc: BaseException) -> bool:
    """Whether exc is an error of the database library that escaped the store's own
    messages (the CLI says "database error" for it)."""
    return isinstance(exc, apsw.Error)


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def read_header(path: Path, size: int = 100) -> bytes:
    """The first `size` bytes of the file at path, read through SQLite's own file layer.

    Never with Python's open(): on POSIX, closing any descriptor of a file drops every lock
    this process holds on it, so a check of the store made while one of its connections is
    live (a recall's reader, the MCP server's identity checks) let another process's SQLite
    take this process for gone: its close deleted the -wal and -shm under the live
    connection, whose next commits were acknowledged and lost. SQLite's unix layer keeps a
    descriptor open while the process holds locks on the file and closes it only when the
    last one is released. OSError when the file cannot be read; b"" for an empty file."""
    if not path.is_file():  # never open a FIFO or device: that could block or consume
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    try:
        handle = apsw.VFSFile(
            "", str(path), [apsw.SQLITE_OPEN_MAIN_DB | apsw.SQLITE_OPEN_READONLY, 0]
        )
    except apsw.Error as exc:  # SQLite keeps no errno for a failed open: say the likely one
        if not path.exists():
            err = errno.ENOENT
        else:
            err = errno.EIO if os.access(path, os.R_OK) else errno.EACCES
        raise OSError(err, os.strerror(err), str(path)) from exc
    try:
        size = min(size, handle.xFileSize())
        return handle.xRead(size, 0) if size else b""
    except apsw.Error as exc:
        raise OSError(errno.EIO, f"cannot read: {exc}", str(path)) from exc
    finally:
        handle.xClose()


def is_sqlite_file(path: Path) -> bool:
    """Whether path is a readable regular file that starts as an SQLite database does."""
    try:
        return read_header(path, len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def inspect_file(path: Path) -> int | None:
    """The schema version of the mem store at path, or None when nothing is there.
    Raises StoreError, touching nothing, for anything that is not a mem store."""
    if not path.exists():
        return None
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a mem store")
    if not path.is_file():
        raise StoreError(f"{path} is not a regular file, not a mem store (left untouched)")
    try:
        header = read_header(path)
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not header:
        raise StoreError(f"{path} is an empty file, not a mem store (left untouched)")
    if header[:16] != SQLITE_MAGIC:
        raise StoreError(f"{path} is not an SQLite database (left untouched)")
    # The application id (header offset 68) is set when a store is created and never
    # changes, so another application's id settles it without opening the file.
    header_app_id = int.from_bytes(header[68:72], "big", signed=True)
    if header_app_id not in (0, APPLICATION_ID):
        raise StoreError(f"{path} is an SQLite database but not a mem store (left untouched)")
    # A WAL database with no -wal file is whole in its main file; an ordinary read-only
    # connection would still create -wal and -shm beside a file that may not be ours.
    immutable = header[18:20] == b"\x02\x02" and not Path(f"{path}-wal").exists()
    probe = None
    try:
        probe, _ = open_reading(
            lambda: raw_connection(path, apsw.SQLITE_OPEN_READONLY, immutable=immutable),
            path,
            # Only a file that says it is a store may be locked (and its log checkpointed
            # when the lock is let go) to read it on a full disk.
            may_lock=header_app_id == APPLICATION_ID,
        )
        # One read transaction: a store being created by another process is seen either
        # not at all or whole. (Not `with probe:`, whose rollback after a failed read
        # raised "cannot rollback - no transaction is active" in place of the failure.)
        probe.execute("BEGIN")
        app_id = probe.execute("PRAGMA application_id").fetchone()[0]
        version = probe.execute("PRAGMA user_version").fetchone()[0]
        tables = {
            r[0] for r in probe.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    except apsw.Error as exc:
        raise open_error(path, exc, probe.system_errno if probe is not None else 0) from exc
    finally:
        if probe is not None:
            probe.close()
    ours = app_id == APPLICATION_ID or (app_id == 0 and 1 <= version and _MEM_TABLES <= tables)
    if not ours:
        raise StoreError(f"{path} is an SQLite database but not a mem store (left untouched)")
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} was written by a newer mem (schema {version} > {SCHEMA_VERSION})")
    return version


def busy_message(path: Path) -> str:
    return (
        f"{path} is locked by another process (waited {BUSY_TIMEOUT_MS / 1000:g} s); "
        "nothing was written, try again"
    )


def open_error(path: Path, exc: apsw.Error, system_errno: int) -> StoreError:
    """What opening (or first reading) the store at path failed with, as one line: a lock,
    a full disk, an I/O error and a file that is not SQLite say different things."""
    if isinstance(exc, apsw.BusyError):
        return StoreBusy(busy_message(path))
    if isinstance(exc, apsw.FullError) or system_errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return StoreFull(
            f"disk full: cannot open {path} (SQLite needs room beside it for its -wal and "
            "-shm files); nothing was changed"
        )
    if isinstance(exc, (apsw.ReadOnlyError, apsw.PermissionsError)):
        return StoreReadOnly(f"{path} cannot be opened: {exc}")
    if isinstance(exc, apsw.IOError):
        detail = os.strerror(system_errno) if system_errno else str(exc)
        return StoreError(f"I/O error opening {path}: {detail}; nothing was changed")
    if isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
        return StoreError(f"cannot read {path} as SQLite: {exc} (left untouched)")
    return StoreError(f"cannot open {path}: {exc}")


def run_migrations(conn: apsw.Connection, path: Path) -> None:
    """Bring the file to SCHEMA_VERSION in one transaction (foreign keys off: a table rebuild
    must not cascade; their consistency is checked before commit)."""
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for target in range(version, SCHEMA_VERSION):
                step = MIGRATIONS[target]
                if callable(step):
                    step(conn)
                else:
                    conn.execute(step)
                conn.execute(f"PRAGMA user_version = {target + 1}")
            if conn.execute("PRAGMA foreign_key_check").fetchone() is not None:
                raise StoreError(f"{path}: migration left dangling references; not upgraded")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.execute("PRAGMA foreign_keys = ON")


# What a store is built under before it is linked into place: ".NAME.PID-HEX.new" (its
# schema, create_store) or ".NAME.PID-HEX.building" (a whole import, store.fill_new_store), with
# SQLite's "-wal", "-shm" and "-journal" beside it while it is open. The builder holds an
# flock on the file until it is done: a file whose lock anyone can take, and whose process
# is gone, is garbage left by a killed process (a PID alone can be another namespace's or
# another host's, on a shared folder).
_STAGING_KINDS = ("new", "building")
_SIBLINGS = ("-wal", "-shm", "-journal")


@dataclass
class StagingFile:
    path: Path
    in_use: bool  # its builder still holds it (or could not be ruled out)


def staging_path(path: Path, kind: str) -> Path:
    """A fresh name beside path to build a store under (kind: one of _STAGING_KINDS)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.{kind}")


def _staging_pattern(path: Path) -> re.Pattern[str]:
    kinds = "|".join(_STAGING_KINDS)
    return re.compile(
        rf"^\.{re.escape(path.name)}\.(\d{{1,10}})-[0-9a-f]{{8}}\.({kinds})"
        rf"({'|'.join(_SIBLINGS)})?$"
    )


def staging_leftovers(path: Path) -> list[StagingFile]:
    """The files beside path that a store was being built in (never the store itself).
    OSError when the folder cannot be listed."""
    pattern = _staging_pattern(path)
    found = sorted(
        ((entry, m) for entry in path.parent.iterdir() if (m := pattern.match(entry.name))),
        key=lambda pair: pair[0],
    )
    mains = {entry for entry, m in found if m.group(3) is None}
    out = []
    for entry, m in found:
        main = entry if m.group(3) is None else entry.with_name(entry.name[: -len(m.group(3))])
        if process_runs(int(m.group(1))):
            in_use = True
        elif main in mains:
            in_use = _locked(main)
        else:  # a log or journal whose store file is gone: nobody can be using it
            in_use = False
        out.append(StagingFile(entry, in_use))
    return out


def remove_dead_staging(path: Path) -> None:
    """Delete what killed processes left while building a store at path (kill -9 during a
    first retain or an import into a new path); files still being built are kept."""
    try:
        leftovers = staging_leftovers(path)
    except OSError:
        return
    for leftover in leftovers:
        if not leftover.in_use:
            try:
                leftover.path.unlink()
            except OSError:
                pass


def process_runs(pid: int) -> bool:
    """Whether a process with this id runs here (True when that cannot be ruled out)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):  # another user's, or no valid id
        return True
    return True


def _locked(file: Path) -> bool:
    """Whether another open file description holds an flock on file (its builder); True
    when it cannot be opened (it cannot be ruled out)."""
    return lock_held(file)


def make_private_folders(path: Path) -> list[Path]:
    """Create path's missing folders, each 0700 (mkdir(parents=True) gives only the last one
    the mode; the rest would follow the umask); returns those it made, outermost first."""
    made: list[Path] = []
    parent = path.parent
    if not parent.exists():
        for folder in reversed([parent, *parent.parents]):
            if not folder.exists():
                folder.mkdir(mode=0o700, exist_ok=True)
                made.append(folder)
    return made


def build_schema(tmp: Path) -> int:
    """Create tmp (0600, which must not exist) with the whole schema; returns an open file
    descriptor holding the builder's flock on it. Close it only after every SQLite
    connection to tmp is closed: closing another descriptor of a file drops the POSIX locks
    SQLite holds on it in this process."""
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        conn = connect(tmp, apsw.SQLITE_OPEN_READWRITE)
        try:
            run_migrations(conn, tmp)
        finally:
            conn.close()
    except BaseException:
        os.close(fd)
        raise
    return fd


def remove_staging(tmp: Path) -> None:
    """Delete a staging file and SQLite's files beside it."""
    for leftover in (tmp, *(Path(f"{tmp}{end}") for end in _SIBLINGS)):
        try:
            leftover.unlink()
        except OSError:  # not made, or its folder could not be
            pass


def create_store(path: Path) -> None:
    """Write a new store next to path and link it into place; losing the race to another
    process creating the same path is fine (its store is used)."""
    make_private_folders(path)  # (StoreCore.__init__ has cleared killed builders' files)
    tmp = staging_path(path, "new")
    fd = None
    try:
        try:
            fd = build_schema(tmp)
        except StoreError as exc:  # about the store at path, not the hidden name
            raise type(exc)(str(exc).replace(str(tmp), str(path))) from exc
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        remove_staging(tmp)
        if fd is not None:
            os.close(fd)
