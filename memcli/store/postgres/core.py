"""The core every part of a PostgreSQL store is built on: one connection (psycopg 3,
autocommit, transactions begun here), its transactions and read snapshots, and the meta table.

Writers: every outermost atomic() takes one transaction-level advisory lock (LOCK_WRITE)
before it writes, so writers of one store take turns as on SQLite (BEGIN IMMEDIATE), and the
promises the shared code makes on that basis hold across machines: a check then a write
(dedupe, a document's replace, a correction closing a still-valid fact) sees every commit
made before it. Readers never wait (MVCC). A writer waits at most MEM_BUSY_TIMEOUT_MS
(lock_timeout), then gets StoreBusy. Transactions run READ COMMITTED, so a statement after
the lock sees what the writer before committed.

change_token() is the number of write transactions other connections committed (a counter
in meta each commit bumps, less this connection's own), the equivalent of SQLite's
data_version.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from memcli.store.postgres import schema
from memcli.store.types import (
    BUSY_TIMEOUT_MS,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreReadOnly,
)
from memcli.storeurl import EXTRA_HINT, masked, scrub, url_problem

_savepoint_names = itertools.count(1)
CONNECT_TIMEOUT_S = 10


def import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError(f"postgresql:// stores need the PostgreSQL driver: {EXTRA_HINT}") from None
    return psycopg


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].strip()


def connect_error(url: str, exc: BaseException) -> StoreError:
    """Why connecting to the server failed, as one line naming the server (never the
    password)."""
    detail = first_line(exc)
    low = detail.lower()
    shown = masked(url)
    if "password authentication failed" in low or "authentication failed" in low:
        return StoreError(f"{shown}: the server refused the credentials ({scrub(detail, url)})")
    if "does not exist" in low and "database" in low:
        return StoreError(f"{shown}: {scrub(detail, url)} (create it with createdb)")
    if "role" in low and "does not exist" in low:
        return StoreError(f"{shown}: {scrub(detail, url)}")
    if any(
        w in low
        for w in ("connection refused", "no such file", "could not connect", "timeout", "resolve")
    ):
        return StoreError(
            f"cannot reach the PostgreSQL server of {shown} (is it running?): {scrub(detail, url)}"
        )
    return StoreError(f"cannot open {shown}: {scrub(detail, url)}")


class Vec:
    """A float vector as a query parameter (pgvector's binary form)."""

    __slots__ = ("values",)

    def __init__(self, values: Any) -> None:
        self.values = np.asarray(values, dtype=np.float32)


def register_vector(conn: Any, oid: int) -> None:
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format

    class VecDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Vec) -> bytes:
            values = obj.values.astype(">f4")
            return struct.pack(">HH", len(values), 0) + values.tobytes()

    VecDumper.oid = oid

    class VecLoader(Loader):
        def load(self, data: Any) -> np.ndarray:
            text = bytes(data)[1:-1].decode()
            return np.array(text.split(","), dtype=np.float32) if text else np.zeros(0, np.float32)

    conn.adapters.register_dumper(Vec, VecDumper)
    conn.adapters.register_loader(oid, VecLoader)


class PgCore:
    """A connection to one mem store on PostgreSQL, with transactions and meta."""

    def __init__(self, url: str, *, create: bool = True, readonly: bool = False) -> None:
        problem = url_problem(url)
        if problem:
            raise StoreError(problem)
        psycopg = import_psycopg()
        self.psycopg = psycopg
        self.url = url
        self.path = masked(url)  # what messages name: the URL without its password
        self.readonly = readonly
        self._rollback_hooks: list[Callable[[], None]] = []
        self._close_hooks: list[Callable[[], None]] = []
        self._commit_hooks: list[Callable[[], None]] = []
        self._own_commits = 0
        self._depth = 0
        try:
            self.conn = psycopg.connect(
                url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name="mem",
            )
        except psycopg.Error as exc:
            raise connect_error(url, exc) from None
        except (ValueError, TypeError) as exc:  # a URL libpq cannot parse
            raise StoreError(f"{masked(url)} is not a valid postgresql:// URL: {exc}") from None
        try:
            with self.translated():
                self.conn.execute(
                    "SELECT set_config('lock_timeout', %s, false), "
                    "set_config('idle_in_transaction_session_timeout', '0', false)",
                    (f"{BUSY_TIMEOUT_MS}ms",),
                )
                if readonly:
                    self.conn.execute("SET default_transaction_read_only = on")
                self.version_at_open = self._open_schema(create)
                self._register_vector_type()
        except BaseException:
            self.conn.close()
            raise

    # -- opening ----------------------------------------------------------------------------

    def _inspect(self) -> int | None:
        """The schema version of the mem store in this database's current schema, None when
        the schema holds no table; StoreError, touching nothing, when it holds another's."""
        tables = {
            r[0]
            for r in self.conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        }
        if not tables:
            return None
        version = None
        if "meta" in tables:
            rows = dict(
                self.conn.execute(
                    "SELECT key, value FROM meta WHERE key IN ('application', 'schema_version')"
                ).fetchall()
            )
            if rows.get("application") == schema.APPLICATION:
                raw = rows.get("schema_version", "")
                version = int(raw) if raw.isdigit() else None
        if version is None:
            raise StoreError(
                f"{self.path} holds tables that are not mem's "
                f"({', '.join(sorted(tables)[:5])}); left untouched"
            )
        if version > schema.SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer mem (schema {version} > "
                f"{schema.SCHEMA_VERSION})"
            )
        foreign = tables - schema.MEM_TABLES
        if foreign:
            raise StoreError(
                f"{self.path} holds tables that are not mem's ({', '.join(sorted(foreign)[:5])}); "
                "left untouched"
            )
        return version

    def _open_schema(self, create: bool) -> int:
        version = self._inspect()
        if version == schema.SCHEMA_VERSION:
            return version
        if version is None and (not create or self.readonly):
            raise StoreError(f"no mem store at {self.path} (run `mem retain` first)")
        if self.readonly and version is not None:
            # As a read-only SQLite file: read at the version it has, never upgraded (the
            # parts ask version_at_open about what an older schema lacks).
            return version
        self._migrate()
        return schema.SCHEMA_VERSION

    def _migrate(self) -> None:
        """Create or upgrade the schema in one transaction, under the migration lock (a
        second process opening the same new database waits, then finds it made)."""
        psycopg = self.psycopg
        self.conn.execute("BEGIN")
        try:
            self.conn.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)", (schema.LOCK_SPACE, schema.LOCK_MIGRATE)
            )
            version = self._inspect() or 0
            if version < schema.SCHEMA_VERSION and version == 0:
                self._check_vector_extension()
            for target in range(version, schema.SCHEMA_VERSION):
                self.conn.execute(schema.MIGRATIONS[target])
                self.conn.execute(
                    "INSERT INTO meta(key, value) VALUES('schema_version', %s) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(target + 1),),
                )
            self.conn.execute("COMMIT")
        except BaseException as exc:
            try:
                self.conn.execute("ROLLBACK")
            except psycopg.Error:
                pass
            if isinstance(exc, psycopg.errors.InsufficientPrivilege) and "extension" in str(exc):
                raise StoreReadOnly(
                    f"{self.path}: pgvector is not set up in this database and this user may "
                    "not add it: a superuser runs CREATE EXTENSION vector in it; nothing was "
                    "changed"
                ) from None
            if isinstance(exc, psycopg.errors.InsufficientPrivilege):
                raise StoreReadOnly(
                    f"{self.path}: not allowed to create mem's tables ({first_line(exc)}); "
                    "nothing was changed"
                ) from None
            raise

    def _check_vector_extension(self) -> None:
        """pgvector must be installed on the server (mem creates it in the database)."""
        row = self.conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
        if row is None:
            raise StoreError(
                f"{self.path}: the server has no pgvector extension (install pgvector on the "
                "PostgreSQL server); nothing was changed"
            )

    def _register_vector_type(self) -> None:
        """Vectors go to the server in pgvector's binary form (Vec) and come back as numpy
        arrays from its text form (the shortest decimal that reads back as the same float32,
        so an export carries the very bits that were imported)."""
        row = self.conn.execute("SELECT to_regtype('vector')::oid").fetchone()
        if row is None or row[0] is None:
            raise StoreError(
                f"{self.path}: the pgvector extension is missing from this database "
                "(CREATE EXTENSION vector)"
            )
        register_vector(self.conn, row[0])

    # -- hooks ------------------------------------------------------------------------------

    def on_rollback(self, hook: Callable[[], None]) -> None:
        self._rollback_hooks.append(hook)

    def on_close(self, hook: Callable[[], None]) -> None:
        self._close_hooks.append(hook)

    def before_commit(self, hook: Callable[[], None]) -> None:
        """Call hook once, just before the outermost transaction now open commits."""
        self._commit_hooks.append(hook)

    def close(self) -> None:
        for hook in self._close_hooks:
            try:
                hook()
            except Exception:
                pass
        self.conn.close()

    # -- transactions -----------------------------------------------------------------------

    def in_transaction(self) -> bool:
        return self.conn.info.transaction_status != self.psycopg.pq.TransactionStatus.IDLE

    @contextmanager
    def translated(self) -> Iterator[None]:
        """The server's failures as one-line StoreErrors (the original stays as __cause__)."""
        psycopg = self.psycopg
        errors = psycopg.errors
        try:
            yield
        except StoreError:
            raise
        except (errors.LockNotAvailable, errors.QueryCanceled) as exc:
            raise StoreBusy(
                f"{self.path} is locked by another writer (waited {BUSY_TIMEOUT_MS / 1000:g} s); "
                "nothing was written, try again"
            ) from exc
        except errors.DiskFull as exc:
            raise StoreFull(f"disk full on the server of {self.path}; nothing was written") from exc
        except (errors.ReadOnlySqlTransaction, errors.InsufficientPrivilege) as exc:
            raise StoreReadOnly(
                f"{self.path} cannot be written: {scrub(first_line(exc), self.url)}"
            ) from exc
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise StoreError(
                f"lost the connection to {self.path}: {scrub(first_line(exc), self.url)}; "
                "what was not committed was not written"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(f"{self.path}: {scrub(first_line(exc), self.url)}") from exc

    @contextmanager
    def atomic(self) -> Iterator[Any]:
        """One transaction: everything inside commits together or not at all. The outermost
        level takes the store's write lock first; inner levels are savepoints."""
        if self.readonly:
            raise StoreReadOnly(f"{self.path} was opened read-only")
        conn = self.conn
        if self._depth or self.in_transaction():  # inside atomic() or snapshot()
            name = f"mem_sp{next(_savepoint_names)}"
            with self.translated():
                conn.execute(f"SAVEPOINT {name}")
            self._depth += 1
            try:
                yield conn
            except BaseException:
                try:
                    conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                    conn.execute(f"RELEASE SAVEPOINT {name}")
                except self.psycopg.Error:
                    pass
                self._after_rollback()
                raise
            finally:
                self._depth -= 1
            with self.translated():
                conn.execute(f"RELEASE SAVEPOINT {name}")
            return
        with self.translated():
            conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            self._depth = 1
            self._commit_hooks = []
            try:
                conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)", (schema.LOCK_SPACE, schema.LOCK_WRITE)
                )
                yield conn
                for hook in self._commit_hooks:
                    hook()
                conn.execute(
                    "UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'commits'"
                )
                conn.execute("COMMIT")
                self._own_commits += 1
            except BaseException:
                if self.in_transaction():
                    try:
                        conn.execute("ROLLBACK")
                    except self.psycopg.Error:
                        pass
                self._after_rollback()
                raise
            finally:
                self._depth = 0
                self._commit_hooks = []

    def _after_rollback(self) -> None:
        for hook in self._rollback_hooks:
            hook()

    @contextmanager
    def snapshot(self) -> Iterator[Any]:
        """A read transaction: every query inside sees one state of the database."""
        if self.in_transaction():
            yield self.conn
            return
        with self.translated():
            self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield self.conn
            finally:
                if self.in_transaction():
                    self.conn.execute("COMMIT")

    def change_token(self) -> int:
        """Commits by other connections since this one opened (see the module docstring)."""
        with self.translated():
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'commits'").fetchone()
        total = int(row[0]) if row and row[0].isdigit() else 0
        return total - self._own_commits

    data_version = change_token

    def defer_foreign_keys(self) -> None:
        self.conn.execute("SET CONSTRAINTS ALL DEFERRED")

    def checkpoint(self) -> None:
        """Nothing to fold in: the server keeps its own log (the scale bench's size asks)."""

    # -- meta -------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES(%s, %s) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def delete_meta(self, key: str) -> None:
        self.conn.execute("DELETE FROM meta WHERE key = %s", (key,))

    def schema_version(self) -> int:
        value = self.get_meta("schema_version")
        return int(value) if value and value.isdigit() else 0

    def has_table(self, name: str) -> bool:
        return (
            self.conn.execute(
                "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = %s",
                (name,),
            ).fetchone()
            is not None
        )

    def writable(self) -> bool:
        return not self.readonly
