"""store.banks on PostgreSQL: user banks by name, renames and deletes, and the staging banks
a retain call writes its documents into (the rules of store/banks.py).

A staging bank's owner holds a session-level advisory lock on it (LOCK_STAGING, its id) for
as long as its connection lives: the server lets go of it when that connection ends, on
whatever machine it was, so a staging bank whose lock anyone can take was left by a process
that is gone (SQLite tells by a process id and a lock file beside the store)."""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Any

from memcli.store.banks import check_bank_name
from memcli.store.postgres import schema
from memcli.store.postgres.core import PgCore
from memcli.store.types import StoreError, iso

# A staging bank's name: a control character no user bank name may hold (labels.py), as
# SQLite's "\x00staging:" (PostgreSQL's text cannot hold NUL).
STAGING_PREFIX = "\x01staging:"


class PgBanks:
    def __init__(self, core: PgCore, facts: Any, reembed: Any) -> None:
        self.core = core
        self.conn = core.conn
        self.facts = facts
        self.reembed = reembed
        self._staging_held: set[int] = set()

    def bank_id(self, name: str) -> int | None:
        row = self.conn.execute(
            "SELECT id FROM banks WHERE name = %s AND kind = 'user'", (name,)
        ).fetchone()
        return row[0] if row else None

    def bank_exists(self, bank_id: int) -> bool:
        return (
            self.conn.execute(
                "SELECT 1 FROM banks WHERE id = %s AND kind = 'user'", (bank_id,)
            ).fetchone()
            is not None
        )

    def require_bank(self, name: str) -> int:
        bank = self.bank_id(name)
        if bank is None:
            known = ", ".join(self.bank_names()) or "none yet"
            raise StoreError(f"unknown bank {name!r} (banks: {known})")
        return bank

    def ensure_bank(self, name: str, now: datetime) -> int:
        check_bank_name(name)
        bank = self.bank_id(name)
        if bank is not None:
            return bank
        self.conn.execute(
            "INSERT INTO banks(name, created_at) VALUES(%s, %s) ON CONFLICT(name) DO NOTHING",
            (name, iso(now)),
        )
        return self.bank_id(name)  # type: ignore[return-value]

    def bank_names(self) -> list[str]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT name FROM banks WHERE kind = 'user' ORDER BY name COLLATE \"C\""
            )
        ]

    def bank_stats(self) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT b.name, (SELECT count(*) FROM facts f WHERE f.bank_id = b.id), "
            "(SELECT count(*) FROM documents d WHERE d.bank_id = b.id), "
            "(SELECT count(*) FROM entities e WHERE e.bank_id = b.id), "
            "(SELECT count(*) FROM links l JOIN facts f ON f.id = l.from_fact "
            " WHERE f.bank_id = b.id), "
            "(SELECT min(event_time) FROM facts f WHERE f.bank_id = b.id), "
            "(SELECT max(event_time) FROM facts f WHERE f.bank_id = b.id), "
            "b.embedder, b.embedder_fingerprint, "
            "(SELECT occurred_start IS NOT NULL FROM facts f WHERE f.bank_id = b.id "
            " ORDER BY event_time, id LIMIT 1), "
            "(SELECT occurred_start IS NOT NULL FROM facts f WHERE f.bank_id = b.id "
            " ORDER BY event_time DESC, id LIMIT 1) "
            "FROM banks b WHERE b.kind = 'user' ORDER BY b.name COLLATE \"C\""
        ).fetchall()
        keys = (
            "bank",
            "facts",
            "documents",
            "entities",
            "links",
            "first",
            "last",
            "embedder",
            "embedder_fingerprint",
            "first_is_period",
            "last_is_period",
        )
        out = []
        for r in rows:
            row = dict(zip(keys, r))
            row["first_is_period"] = bool(row["first_is_period"])
            row["last_is_period"] = bool(row["last_is_period"])
            out.append(row)
        return out

    def bank_created_at(self, bank_id: int) -> datetime | None:
        row = self.conn.execute("SELECT created_at FROM banks WHERE id = %s", (bank_id,)).fetchone()
        return datetime.fromisoformat(row[0]) if row and row[0] else None

    def rename_bank(self, bank_id: int, new_name: str) -> None:
        if self.bank_id(new_name) is not None:
            raise StoreError(f"a bank named {new_name!r} already exists")
        self.conn.execute("UPDATE banks SET name = %s WHERE id = %s", (new_name, bank_id))

    def delete_bank(self, bank_id: int) -> dict[str, int]:
        counts = self.facts.delete_facts(self.facts.fact_ids_of_bank(bank_id))
        counts["documents"] = self.conn.execute(
            "SELECT count(*) FROM documents WHERE bank_id = %s", (bank_id,)
        ).fetchone()[0]
        counts["entities"] += self.conn.execute(
            "SELECT count(*) FROM entities WHERE bank_id = %s", (bank_id,)
        ).fetchone()[0]
        self.conn.execute("DELETE FROM banks WHERE id = %s", (bank_id,))
        self.reembed.forget_bank(bank_id)
        return counts

    def bank_row(self, bank_id: int) -> dict[str, Any]:
        name, created, embedder, fingerprint = self.conn.execute(
            "SELECT name, created_at, embedder, embedder_fingerprint FROM banks WHERE id = %s",
            (bank_id,),
        ).fetchone()
        return {
            "name": name,
            "created_at": created,
            "embedder": embedder,
            "embedder_fingerprint": fingerprint,
        }

    # -- staging ----------------------------------------------------------------------------

    def create_staging_bank(self, bank_id: int, now: datetime) -> int:
        token = os.urandom(4).hex()
        owner = f"{socket.gethostname()}:{os.getpid()}:{token}"
        (staging,) = self.conn.execute(
            "INSERT INTO banks(name, created_at, kind, owner) VALUES(%s, %s, 'staging', %s) "
            "RETURNING id",
            (f"{STAGING_PREFIX}{bank_id}:{owner}", iso(now), owner),
        ).fetchone()
        self.conn.execute(
            "SELECT pg_advisory_lock(%s, %s)", (schema.LOCK_SPACE + schema.LOCK_STAGING, staging)
        )
        self._staging_held.add(staging)
        self.core.on_rollback(lambda: self.release_staging_lock(staging))
        return staging

    def release_staging_lock(self, staging_bank: int) -> None:
        if staging_bank in self._staging_held:
            self._staging_held.discard(staging_bank)
            self.conn.execute(
                "SELECT pg_advisory_unlock(%s, %s)",
                (schema.LOCK_SPACE + schema.LOCK_STAGING, staging_bank),
            )

    def release_staging_locks(self) -> None:
        """Nothing to do: the server lets go of a session's locks when it ends."""

    def abandoned_staging_banks(self) -> list[int]:
        """Staging banks whose owner's connection is gone: their lock can be taken (held
        for this transaction only)."""
        out = []
        for (staging,) in self.conn.execute(
            "SELECT id FROM banks WHERE kind = 'staging' ORDER BY id"
        ).fetchall():
            if staging in self._staging_held:
                continue
            (free,) = self.conn.execute(
                "SELECT pg_try_advisory_xact_lock(%s, %s)",
                (schema.LOCK_SPACE + schema.LOCK_STAGING, staging),
            ).fetchone()
            if free:
                out.append(staging)
        return out

    def remove_orphan_staging_locks(self) -> None:
        """No lock files on PostgreSQL."""

    def staging_lock_of(self, owner: str | None) -> None:
        return None
