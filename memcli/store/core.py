"""The core every part of the store is built on: one connection to one mem file, its
transactions, its read snapshots and the meta table.

Opening follows base.py (a file is only written once it is known to be a mem store). The
parts (banks.py, facts.py, vectors.py, ...) each hold this core and run their SQL on its
connection; what a part caches about the file is dropped through the hooks here when a
transaction rolls back, and what it holds open is let go when the connection closes.
"""

from __future__ import annotations

import errno
import itertools
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from memcli.store.base import (
    busy_message,
    create_store,
    inspect_file,
    on_read_only_media,
    open_error,
    open_reading,
    raw_connection,
    remove_dead_staging,
    run_migrations,
    set_up,
)
from memcli.store.schema import SCHEMA_VERSION
from memcli.store.types import (
    BUSY_TIMEOUT_MS,
    InterruptedAfterCommit,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreReadOnly,
)

_savepoint_names = itertools.count(1)


class StoreCore:
    """A connection to one mem store, with transactions and meta. The parts of a Store
    share one."""

    def __init__(
        self, path: str | os.PathLike, *, create: bool = True, readonly: bool = False
    ) -> None:
        self.path = Path(path).expanduser()
        # What the parts ask to hear of (vectors: rollbacks drop their cached scans; banks:
        # a close lets go of staging locks).
        self._rollback_hooks: list[Callable[[], None]] = []
        self._close_hooks: list[Callable[[], None]] = []
        if create and not readonly:  # a command that may write: clear a killed one's litter
            remove_dead_staging(self.path)
        try:
            version = inspect_file(self.path)
            if version is None:
                if not create or readonly:
                    raise StoreError(f"no mem store at {self.path} (run `mem retain` first)")
                try:
                    create_store(self.path)
                except OSError as exc:
                    raise StoreError(f"cannot create {self.path}: {exc.strerror or exc}") from exc
                version = inspect_file(self.path)
            # Read-only media: the store is read as it is (and cannot be written).
            self.immutable = on_read_only_media(self.path)
            self.readonly = readonly or self.immutable
            flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
            # exclusive: a reader on a full disk holds the store alone (base.open_reading).
            conn, self.exclusive = open_reading(
                lambda: raw_connection(self.path, flags, immutable=self.immutable),
                self.path,
                may_lock=readonly,
            )
            self.conn = set_up(conn, self.path)
        except apsw.Error as exc:
            raise open_error(self.path, exc, 0) from exc
        try:
            if not self.readonly:
                try:
                    self._use_wal()
                except apsw.Error as exc:
                    raise open_error(self.path, exc, self.conn.system_errno) from exc
                if version != SCHEMA_VERSION:
                    if not self.writable():
                        raise StoreReadOnly(
                            f"{self.path} needs an upgrade to schema {SCHEMA_VERSION} "
                            "but cannot be written"
                        )
                    with self.translated():
                        run_migrations(self.conn, self.path)
                    version = SCHEMA_VERSION
        except BaseException:
            self.conn.close()
            raise
        # What the reads may rely on: a read-only file stays at the version it has.
        self.version_at_open: int = version

    def on_rollback(self, hook: Callable[[], None]) -> None:
        """Call hook after every rollback (of a transaction or a savepoint) on this
        connection: what a part knows of the rolled-back writes is no longer true."""
        self._rollback_hooks.append(hook)

    def on_close(self, hook: Callable[[], None]) -> None:
        """Call hook before the connection closes."""
        self._close_hooks.append(hook)

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
                    raise StoreBusy(busy_message(self.path)) from None
                time.sleep(0.01)

    def close(self) -> None:
        for hook in self._close_hooks:
            hook()
        self.conn.close()

    def skip_checkpoint_on_close(self) -> None:
        """Close without the checkpoint and WAL removal a close does (Store.abandon)."""
        self.conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)

    # -- transactions ---------------------------------------------------------------------

    @contextmanager
    def translated(self) -> Iterator[None]:
        """SQLite's failures as one-line StoreErrors (the original stays as __cause__)."""
        try:
            yield
        except apsw.BusyError as exc:
            raise StoreBusy(busy_message(self.path)) from exc
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
        with self.translated():
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

    def _after_rollback(self) -> None:
        for hook in self._rollback_hooks:
            hook()

    def defer_foreign_keys(self) -> None:
        """Check foreign keys at this transaction's commit, not at each statement: an import
        writes rows before the rows they point to."""
        self.conn.execute("PRAGMA defer_foreign_keys = ON")

    def checkpoint(self) -> None:
        """Move the write-ahead log into the main file and empty it, so that the main file's
        size is the store's (the scale bench's bytes per fact)."""
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def data_version(self) -> int:
        """A number that changes whenever another connection commits to the file (PRAGMA
        data_version): equal readings before and after reads made on several connections
        mean every one of them saw the same state."""
        with self.translated():
            return self.conn.execute("PRAGMA data_version").fetchone()[0]

    @contextmanager
    def snapshot(self) -> Iterator[apsw.Connection]:
        """A read transaction: every query inside sees one consistent state of the file."""
        if self.conn.in_transaction:
            yield self.conn
            return
        with self.translated():
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

    def delete_meta(self, key: str) -> None:
        self.conn.execute("DELETE FROM meta WHERE key = ?", (key,))

    def schema_version(self) -> int:
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    def has_table(self, name: str) -> bool:
        return (
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
            ).fetchone()
            is not None
        )
