"""Banks: named, separate sets of memories in one file. A staging bank holds a retain call's
documents until they go live together (see documents.py); users never see one."""

from __future__ import annotations

import fcntl
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from memcli.labels import bank_name_problem
from memcli.paths import lock_held
from memcli.store.base import process_runs
from memcli.store.core import StoreCore
from memcli.store.facts import FactsPart
from memcli.store.reembed import ReembedPart
from memcli.store.types import StoreError, iso

STAGING_PREFIX = "\x00staging:"


def check_bank_name(name: str) -> str:
    problem = bank_name_problem(name)
    if problem:
        raise StoreError(problem)
    return name


class BanksPart:
    """store.banks: user banks by name, their rows, renames and deletes, and the staging
    banks a retain call writes its documents into."""

    def __init__(self, core: StoreCore, facts: FactsPart, reembed: ReembedPart) -> None:
        self.core = core
        self.conn = core.conn
        self.facts = facts
        self.reembed = reembed
        # Staging bank -> (descriptor holding its lock file's flock, the lock file).
        self._staging_locks: dict[int, tuple[int, Path]] = {}
        core.on_close(self.release_staging_locks)

    def bank_id(self, name: str) -> int | None:
        row = self.conn.execute(
            "SELECT id FROM banks WHERE name = ? AND kind = 'user'", (name,)
        ).fetchone()
        return row[0] if row else None

    def bank_exists(self, bank_id: int) -> bool:
        """Whether a user bank with this id is there (not deleted since it was found)."""
        row = self.conn.execute(
            "SELECT 1 FROM banks WHERE id = ? AND kind = 'user'", (bank_id,)
        ).fetchone()
        return row is not None

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
            "INSERT OR IGNORE INTO banks(name, created_at) VALUES(?, ?)", (name, iso(now))
        )
        return self.bank_id(name)  # type: ignore[return-value]

    def bank_names(self) -> list[str]:
        return [
            r[0]
            for r in self.conn.execute("SELECT name FROM banks WHERE kind = 'user' ORDER BY name")
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
            # Whether the first and last are a stated period's start (a day of the calendar,
            # as said) or the instant a fact was said (UTC): text output shows the latter in
            # local time. By the (bank_id, event_time) index, like min and max.
            "(SELECT occurred_start IS NOT NULL FROM facts f WHERE f.bank_id = b.id "
            " ORDER BY event_time LIMIT 1), "
            "(SELECT occurred_start IS NOT NULL FROM facts f WHERE f.bank_id = b.id "
            " ORDER BY event_time DESC LIMIT 1) "
            "FROM banks b WHERE b.kind = 'user' ORDER BY b.name"
        )
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
        row = self.conn.execute("SELECT created_at FROM banks WHERE id = ?", (bank_id,)).fetchone()
        return datetime.fromisoformat(row[0]) if row and row[0] else None

    # -- renamed, deleted ----------------------------------------------------------------

    def rename_bank(self, bank_id: int, new_name: str) -> None:
        if self.bank_id(new_name) is not None:
            raise StoreError(f"a bank named {new_name!r} already exists")
        self.conn.execute("UPDATE banks SET name = ? WHERE id = ?", (new_name, bank_id))

    def delete_bank(self, bank_id: int) -> dict[str, int]:
        """Remove a bank and everything in it. Inside atomic()."""
        counts = self.facts.delete_facts(self.facts.fact_ids_of_bank(bank_id))
        counts["documents"] = self.conn.execute(
            "SELECT count(*) FROM documents WHERE bank_id = ?", (bank_id,)
        ).fetchone()[0]
        counts["entities"] += self.conn.execute(
            "SELECT count(*) FROM entities WHERE bank_id = ?", (bank_id,)
        ).fetchone()[0]
        # The remaining rows (documents, chunks, entities and their keys) cascade.
        self.conn.execute("DELETE FROM banks WHERE id = ?", (bank_id,))
        self.reembed.forget_bank(bank_id)
        return counts

    def bank_row(self, bank_id: int) -> dict[str, Any]:
        name, created, embedder, fingerprint = self.conn.execute(
            "SELECT name, created_at, embedder, embedder_fingerprint FROM banks WHERE id = ?",
            (bank_id,),
        ).fetchone()
        return {
            "name": name,
            "created_at": created,
            "embedder": embedder,
            "embedder_fingerprint": fingerprint,
        }

    # -- staging --------------------------------------------------------------------------

    def create_staging_bank(self, bank_id: int, now: datetime) -> int:
        """A hidden bank for one retain call's documents, owned by this process: its owner
        is "PID:TOKEN", and the process holds an flock on a file named by both beside the
        store until the bank is published or discarded (release_staging_lock)."""
        token = os.urandom(4).hex()
        name = f"{STAGING_PREFIX}{bank_id}:{os.getpid()}:{token}"
        self.conn.execute(
            "INSERT INTO banks(name, created_at, kind, owner) VALUES(?, ?, 'staging', ?)",
            (name, iso(now), f"{os.getpid()}:{token}"),
        )
        staging = self.conn.last_insert_rowid()
        lock = self._staging_lock_path(os.getpid(), token)
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a folder mem cannot write in: the process id alone says
            return staging
        self._staging_locks[staging] = (fd, lock)
        return staging

    def release_staging_locks(self) -> None:
        """Let go of every staging bank's lock this connection holds (it closes): a retain
        cut short leaves its staging bank, which the next writer purges once it is free."""
        held, self._staging_locks = self._staging_locks, {}
        for fd, _ in held.values():
            os.close(fd)

    def release_staging_lock(self, staging_bank: int) -> None:
        """Let go of a staging bank's lock and remove its file (published or discarded)."""
        held = self._staging_locks.pop(staging_bank, None)
        if held is not None:
            fd, lock = held
            lock.unlink(missing_ok=True)
            os.close(fd)

    def _staging_lock_path(self, pid: int | str, token: str) -> Path:
        path = self.core.path
        return path.with_name(f".{path.name}.staging-{pid}-{token}.lock")

    def abandoned_staging_banks(self) -> list[int]:
        """Staging banks whose owning process is gone (killed before it published): its
        process id runs nowhere here and nobody holds its lock. The lock is what tells for
        an owner in another PID namespace (a container sharing the store's folder), whose
        process id means nothing here: by the id alone, its live import was dropped."""
        out = []
        for bank_id, owner in self.conn.execute(
            "SELECT id, owner FROM banks WHERE kind = 'staging'"
        ).fetchall():
            pid, _, token = (owner or "").partition(":")
            if pid.isdigit() and process_runs(int(pid)):
                continue
            if token and lock_held(self._staging_lock_path(pid, token), if_unopenable=False):
                continue
            out.append(bank_id)
        return out

    def remove_orphan_staging_locks(self) -> None:
        """Remove the staging lock files beside the store that no staging bank names and no
        process holds. Inside atomic()."""
        path = self.core.path
        owned = {
            str(owner).replace(":", "-")
            for (owner,) in self.conn.execute(
                "SELECT owner FROM banks WHERE kind = 'staging' AND owner IS NOT NULL"
            )
        }
        prefix = f".{path.name}.staging-"
        try:
            names = [p for p in path.parent.iterdir() if p.name.startswith(prefix)]
        except OSError:
            return
        for lock in names:
            key = lock.name[len(prefix) :].removesuffix(".lock")
            if lock.name.endswith(".lock") and key not in owned and lock.is_file():
                if not lock_held(lock, if_unopenable=False):
                    try:
                        lock.unlink()
                    except OSError:
                        pass  # gone meanwhile, or not ours to remove

    def staging_lock_of(self, owner: str | None) -> Path | None:
        """The lock file a staging bank's owner ("PID:TOKEN") holds, None for an owner of
        older mem (a process id alone)."""
        pid, _, token = (owner or "").partition(":")
        return self._staging_lock_path(pid, token) if token else None
