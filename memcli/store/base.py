"""Opening one mem file safely, transactions, and the meta table.

A file is only ever opened for writing once it is known to be a mem store: a path that does
not exist is created whole (schema written to a private temporary file, then linked into
place, so no other process ever sees a half-made store), and an existing file must carry
mem's application id (or, for files from before it was set, mem's tables and a known schema
version). Anything else, an empty file included, is left untouched.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import apsw
import sqlite_vec

from memcli.paths import lock_held
from memcli.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from memcli.store.types import (
    BUSY_TIMEOUT_MS,
    InterruptedAfterCommit,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreReadOnly,
)

_MEM_TABLES = {"meta", "banks", "facts", "fact_fts"}
_savepoint_names = itertools.count(1)


PAGE_CACHE_KIB = 16384


def _raw_connection(path: Path, flags: int, *, immutable: bool = False) -> apsw.Connection:
    if immutable:
        flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        conn = apsw.Connection(f"file:{quote(str(path.resolve()))}?immutable=1", flags=flags)
    else:
        conn = apsw.Connection(str(path), flags=flags)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return conn


def _set_up(conn: apsw.Connection) -> apsw.Connection:
    """sqlite-vec and the PRAGMAs every store connection runs with."""
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.execute("PRAGMA foreign_keys = ON")
    # 16 MiB of page cache, not SQLite's 2: reading a bank's vector chunks for the scan
    # (store/vectors.py) took 47-72 ms at 100k facts with 2 MiB and 32-38 ms with 8 MiB or
    # more (same file, same process start). Pages are only allocated as they are read.
    conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
    return conn


def _connect(path: Path, flags: int) -> apsw.Connection:
    conn = _raw_connection(path, flags)
    try:
        return _set_up(conn)
    except BaseException:
        conn.close()
        raise


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
    for writing; query_only keeps it from writing. Otherwise the lack of space is StoreFull."""
    conn = connect()
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn, False
    except apsw.IOError as exc:
        no_space = conn.system_errno
        conn.close()
        if no_space not in NO_SPACE:
            raise
        if not may_lock:
            raise StoreFull(
                f"disk full: cannot open {path} ({os.strerror(no_space)}: SQLite needs room "
                "for the -shm file beside it); nothing was written"
            ) from exc
    except BaseException:
        conn.close()
        raise
    conn = _raw_connection(path, apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
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
    try:
        probe, _ = open_reading(
            lambda: _raw_connection(path, apsw.SQLITE_OPEN_READONLY, immutable=immutable),
            path,
            # Only a file that says it is a store may be locked (and its log checkpointed
            # when the lock is let go) to read it on a full disk.
            may_lock=header_app_id == APPLICATION_ID,
        )
        try:
            # One read transaction: a store being created by another process is seen either
            # not at all or whole.
            with probe:
                app_id = probe.execute("PRAGMA application_id").fetchone()[0]
                version = probe.execute("PRAGMA user_version").fetchone()[0]
                tables = {
                    r[0]
                    for r in probe.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                }
        finally:
            probe.close()
    except apsw.Error as exc:
        raise StoreError(f"cannot read {path} as SQLite: {exc} (left untouched)") from exc
    ours = app_id == APPLICATION_ID or (app_id == 0 and 1 <= version and _MEM_TABLES <= tables)
    if not ours:
        raise StoreError(f"{path} is an SQLite database but not a mem store (left untouched)")
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} was written by a newer mem (schema {version} > {SCHEMA_VERSION})")
    return version


def _run_migrations(conn: apsw.Connection, path: Path) -> None:
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
# schema, _create) or ".NAME.PID-HEX.building" (a whole import, store.fill_new_store), with
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
        conn = _connect(tmp, apsw.SQLITE_OPEN_READWRITE)
        try:
            _run_migrations(conn, tmp)
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


def _create(path: Path) -> None:
    """Write a new store next to path and link it into place; losing the race to another
    process creating the same path is fine (its store is used)."""
    make_private_folders(path)  # (StoreBase.__init__ has cleared killed builders' files)
    tmp = staging_path(path, "new")
    fd = None
    try:
        fd = build_schema(tmp)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        remove_staging(tmp)
        if fd is not None:
            os.close(fd)


class StoreBase:
    """A connection to one mem store, with transactions and meta. See Store for the rest."""

    def __init__(
        self, path: str | os.PathLike, *, create: bool = True, readonly: bool = False
    ) -> None:
        self.path = Path(path).expanduser()
        if create and not readonly:  # a command that may write: clear a killed one's litter
            remove_dead_staging(self.path)
        try:
            version = inspect_file(self.path)
            if version is None:
                if not create or readonly:
                    raise StoreError(f"no mem store at {self.path} (run `mem retain` first)")
                try:
                    _create(self.path)
                except OSError as exc:
                    raise StoreError(f"cannot create {self.path}: {exc.strerror or exc}") from exc
                version = inspect_file(self.path)
            # Read-only media: the store is read as it is (and cannot be written).
            self.immutable = on_read_only_media(self.path)
            self.readonly = readonly or self.immutable
            flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
            conn, self.exclusive = open_reading(
                lambda: _raw_connection(self.path, flags, immutable=self.immutable),
                self.path,
                may_lock=readonly,
            )
            try:
                self.conn = _set_up(conn)
            except BaseException:
                conn.close()
                raise
        except apsw.BusyError as exc:
            raise StoreBusy(self._busy_message()) from exc
        except apsw.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            if not self.readonly:
                self._use_wal()
                if version != SCHEMA_VERSION:
                    if not self.writable():
                        raise StoreReadOnly(
                            f"{self.path} needs an upgrade to schema {SCHEMA_VERSION} "
                            "but cannot be written"
                        )
                    with self._translated():
                        _run_migrations(self.conn, self.path)
                    version = SCHEMA_VERSION
        except BaseException:
            self.conn.close()
            raise
        # What the reads may rely on: a read-only file stays at the version it has.
        self.version_at_open: int = version

    def reader(self) -> StoreBase:
        """Another connection to the same file (for an arm run in a second thread)."""
        if self.exclusive:  # it would wait for this one to close: run on this one instead
            raise StoreError(f"{self.path} is held by one connection (the disk is full)")
        return type(self)(self.path, create=False, readonly=self.readonly)

    def writable(self) -> bool:
        return os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)

    def _use_wal(self) -> None:
        """Switch the file to WAL (a property of the file, set once, outside a transaction).
        The switch needs an exclusive lock and SQLite answers SQLITE_BUSY at once instead of
        waiting on the busy timeout, so processes opening one new file together retry."""
        if not self.writable():
            return
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
                return
            except apsw.BusyError:
                if time.monotonic() > deadline:
                    raise StoreBusy(self._busy_message()) from None
                time.sleep(0.01)

    def close(self) -> None:
        # Staging banks this connection still owns (a retain cut short) are let go: with
        # their locks free, the next writer purges them (store/banks.py).
        for fd, _ in self.__dict__.pop("_staging_locks", {}).values():
            os.close(fd)
        self.conn.close()

    def abandon(self) -> None:
        """Close a connection whose file was replaced or deleted under it, without the
        checkpoint and WAL removal a close does: the -wal and -shm beside the path now
        belong to the file there, and writing this connection's pages into them would
        corrupt it."""
        try:
            self.conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        finally:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ---------------------------------------------------------------------

    def _busy_message(self) -> str:
        return (
            f"{self.path} is locked by another process (waited "
            f"{BUSY_TIMEOUT_MS / 1000:g} s); nothing was written, try again"
        )

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """SQLite's failures as one-line StoreErrors (the original stays as __cause__)."""
        try:
            yield
        except apsw.BusyError as exc:
            raise StoreBusy(self._busy_message()) from exc
        except apsw.FullError as exc:
            raise StoreFull(f"disk full writing {self.path}; nothing was written") from exc
        except (apsw.ReadOnlyError, apsw.PermissionsError) as exc:
            raise StoreReadOnly(f"{self.path} cannot be written: {exc}") from exc
        except (apsw.CorruptError, apsw.NotADBError) as exc:
            raise StoreError(f"{self.path} is damaged: {exc} (`mem doctor` checks it)") from exc
        except apsw.IOError as exc:
            # A write refused for lack of space (or past the file size limit) is an I/O
            # error to SQLite; the OS's errno says which.
            if self.conn.system_errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
                raise StoreFull(
                    f"disk full writing {self.path} ({os.strerror(self.conn.system_errno)}); "
                    "nothing was written"
                ) from exc
            raise StoreError(f"I/O error on {self.path}: {exc}; nothing was written") from exc

    @contextmanager
    def atomic(self) -> Iterator[apsw.Connection]:
        """One transaction: everything inside commits together or not at all.

        The outermost level takes the write lock up front (BEGIN IMMEDIATE), so two writers
        queue on the busy timeout instead of failing half way on lock upgrade; inner levels
        are savepoints. A failed rollback never hides the error that caused it. A Ctrl-C
        that comes as the transaction commits is InterruptedAfterCommit: it is stored."""
        if self.readonly:
            if self.immutable:
                raise StoreReadOnly(f"{self.path} is read-only: nothing was written")
            raise StoreReadOnly(f"{self.path} was opened read-only")
        if self.conn.in_transaction:
            name = f"mem_sp{next(_savepoint_names)}"
            self.conn.execute(f"SAVEPOINT {name}")
            try:
                yield self.conn
            except BaseException:
                try:
                    self.conn.execute(f"ROLLBACK TO {name}")
                    self.conn.execute(f"RELEASE {name}")
                except apsw.Error:
                    pass
                self._after_rollback()
                raise
            self.conn.execute(f"RELEASE {name}")
            return
        if not self.writable():
            raise StoreReadOnly(f"{self.path} is read-only: nothing was written")
        with self._translated():
            self.conn.execute("BEGIN IMMEDIATE")
            committing = False
            try:
                yield self.conn
                committing = True
                self.conn.execute("COMMIT")
            except BaseException as exc:
                if self.conn.in_transaction:
                    try:
                        self.conn.execute("ROLLBACK")
                    except apsw.Error:
                        pass
                elif committing and isinstance(exc, KeyboardInterrupt):
                    # Ctrl-C during the COMMIT (its fsync) is raised as the call returns:
                    # the transaction is stored, and callers must not count it as undone
                    # (a retain said "kept 0 items" of a batch it had stored).
                    raise InterruptedAfterCommit(*exc.args) from exc
                self._after_rollback()
                raise

    def defer_foreign_keys(self) -> None:
        """Check foreign keys at this transaction's commit, not at each statement: an import
        writes rows before the rows they point to."""
        self.conn.execute("PRAGMA defer_foreign_keys = ON")

    def checkpoint(self) -> None:
        """Move the write-ahead log into the main file and empty it, so that the main file's
        size is the store's (the scale bench's bytes per fact)."""
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _after_rollback(self) -> None:
        """Drop what caches know of writes that were just rolled back (mixins extend it)."""

    # The name retain and bench used before atomic() existed.
    write = atomic

    def data_version(self) -> int:
        """A number that changes whenever another connection commits to the file (PRAGMA
        data_version): equal readings before and after reads made on several connections
        mean every one of them saw the same state."""
        with self._translated():
            return self.conn.execute("PRAGMA data_version").fetchone()[0]

    @contextmanager
    def snapshot(self) -> Iterator[apsw.Connection]:
        """A read transaction: every query inside sees one consistent state of the file."""
        if self.conn.in_transaction:
            yield self.conn
            return
        with self._translated():
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                if self.conn.in_transaction:
                    self.conn.execute("COMMIT")

    # -- meta -----------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def schema_version(self) -> int:
        return self.conn.execute("PRAGMA user_version").fetchone()[0]
