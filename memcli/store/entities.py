"""Entities (canonical name, aliases, lookup keys) and which facts mention them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from memcli.store.core import StoreCore
from memcli.store.types import batched, iso, marks


class EntitiesPart:
    """store.entities: entities, their lookup keys, and which facts mention them."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self.conn = core.conn

    def insert_entity(self, bank_id: int, name: str, seen: datetime, keys: Sequence[str]) -> int:
        self.conn.execute(
            "INSERT INTO entities(bank_id, name, first_seen, last_seen, mention_count) "
            "VALUES(?, ?, ?, ?, 0)",
            (bank_id, name, iso(seen), iso(seen)),
        )
        entity_id = self.conn.last_insert_rowid()
        self.add_entity_keys(entity_id, keys)
        return entity_id

    def add_entity_keys(self, entity_id: int, keys: Sequence[str]) -> None:
        self.conn.executemany(
            "INSERT OR IGNORE INTO entity_keys(key, entity_id) VALUES(?, ?)",
            [(k, entity_id) for k in keys],
        )

    def add_entity_alias(self, entity_id: int, name: str, keys: Sequence[str]) -> None:
        """Record another spelling of an entity (and its lookup keys) unless already known."""
        row = self.conn.execute(
            "SELECT name, aliases FROM entities WHERE id = ?", (entity_id,)
        ).fetchone()
        aliases = json.loads(row[1])
        if name.lower() != row[0].lower() and name.lower() not in {a.lower() for a in aliases}:
            aliases.append(name)
            self.conn.execute(
                "UPDATE entities SET aliases = ? WHERE id = ?",
                (json.dumps(aliases, ensure_ascii=False), entity_id),
            )
            self.add_entity_keys(entity_id, keys)

    def entity_candidates(
        self, bank_id: int, keys: Sequence[str], limit: int = 50
    ) -> list[tuple[int, str, list[str], datetime | None]]:
        """Entities of the bank sharing a lookup key with a name: (id, name, aliases,
        last_seen), those matching the whole name (keys[0]) first."""
        if not keys:
            return []
        rows = self.conn.execute(
            "SELECT e.id, e.name, e.aliases, e.last_seen FROM entity_keys k "
            f"JOIN entities e ON e.id = k.entity_id WHERE k.key IN ({marks(len(keys))}) "
            # "+": the keys find the rows; the bank is checked on each. Searched by bank_id,
            # the plan read every entity of the bank per name (11 ms at 30k facts).
            "AND +e.bank_id = ? "
            # Rows that match the whole name first, so a common token cannot push them out.
            "GROUP BY e.id ORDER BY max(k.key = ?) DESC, e.mention_count DESC LIMIT ?",
            (*keys, bank_id, keys[0], limit),
        ).fetchall()
        return [
            (eid, name, json.loads(aliases), datetime.fromisoformat(last) if last else None)
            for eid, name, aliases, last in rows
        ]

    def cooccurring_entities(self, entity_id: int, recent_facts: int = 200) -> set[int]:
        """Entities mentioned with this one in its latest facts (bounded for hub entities)."""
        return {
            r[0]
            for r in self.conn.execute(
                "SELECT DISTINCT b.entity_id FROM (SELECT fact_id FROM fact_entities "
                "WHERE entity_id = ? ORDER BY fact_id DESC LIMIT ?) a "
                "JOIN fact_entities b ON a.fact_id = b.fact_id WHERE b.entity_id != ?",
                (entity_id, recent_facts, entity_id),
            )
        }

    def mention_entity(self, fact_id: int, entity_id: int, seen: datetime) -> None:
        """Tie a fact to an entity and count the mention."""
        self.conn.execute(
            "INSERT OR IGNORE INTO fact_entities(fact_id, entity_id) VALUES(?, ?)",
            (fact_id, entity_id),
        )
        if self.conn.changes():
            self.conn.execute(
                "UPDATE entities SET mention_count = mention_count + 1, "
                "last_seen = max(coalesce(last_seen, ?), ?), "
                "first_seen = min(coalesce(first_seen, ?), ?) WHERE id = ?",
                (iso(seen), iso(seen), iso(seen), iso(seen), entity_id),
            )

    def entity_fact_count(self, entity_id: int) -> int:
        return self.conn.execute(
            "SELECT count(*) FROM fact_entities WHERE entity_id = ?", (entity_id,)
        ).fetchone()[0]

    def entities_of_facts(self, fact_ids: Sequence[int]) -> list[tuple[int, int]]:
        """(fact id, entity id) pairs for these facts."""
        if not fact_ids:
            return []
        return self.conn.execute(
            f"SELECT fact_id, entity_id FROM fact_entities WHERE fact_id IN "
            f"({marks(len(fact_ids))})",
            list(fact_ids),
        ).fetchall()

    def entity_expansions(
        self, entity_ids: Sequence[int], bank_id: int, limit: int
    ) -> dict[int, tuple[int, list[int]]]:
        """entity id -> (how many facts of any bank carry it, its latest facts in the bank,
        newest first, at most limit), for each of these entities.

        One statement answered as one row: the graph arm expands ~10 entities a query, up to
        200 facts each, and apsw hands the GIL back at every statement and every row, so
        beside another thread of recall a statement per entity and a row per fact waited for
        the GIL hundreds of times."""
        if not entity_ids:
            return {}
        (found,) = self.conn.execute(
            "SELECT json_group_array(json_array(j.value, "
            "(SELECT count(*) FROM fact_entities WHERE entity_id = j.value), "
            "json((SELECT json_group_array(latest.fact_id ORDER BY latest.fact_id DESC) FROM "
            "(SELECT fe.fact_id FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id "
            "WHERE fe.entity_id = j.value AND f.bank_id = ? ORDER BY fe.fact_id DESC LIMIT ?) "
            "AS latest)))) FROM json_each(?) AS j",
            (bank_id, limit, json.dumps(list(dict.fromkeys(entity_ids)))),
        ).fetchone()
        return {entity: (count, ids) for entity, count, ids in json.loads(found)}

    def entity_names_of(self, fact_ids: Sequence[int]) -> dict[int, list[str]]:
        """fact id -> the names of the entities it mentions, in name order."""
        out: dict[int, list[str]] = {}
        for batch in batched(list(fact_ids)):
            for fid, name in self.conn.execute(
                "SELECT fe.fact_id, e.name FROM fact_entities fe JOIN entities e "
                f"ON e.id = fe.entity_id WHERE fe.fact_id IN ({marks(len(batch))}) "
                "ORDER BY e.name",
                batch,
            ):
                out.setdefault(fid, []).append(name)
        return out

    def fact_entity_rows(self, fact_id: int) -> list[tuple[int, str, list[str]]]:
        """(entity id, name, aliases) of the entities a fact mentions."""
        return [
            (eid, name, json.loads(aliases))
            for eid, name, aliases in self.conn.execute(
                "SELECT e.id, e.name, e.aliases FROM fact_entities fe "
                "JOIN entities e ON e.id = fe.entity_id WHERE fe.fact_id = ? ORDER BY e.name",
                (fact_id,),
            )
        ]
