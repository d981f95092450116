"""store.entities on PostgreSQL: entities, their lookup keys, and which facts mention them
(the rules of store/entities.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from memcli.store.postgres.core import PgCore
from memcli.store.types import iso


class PgEntities:
    def __init__(self, core: PgCore) -> None:
        self.core = core
        self.conn = core.conn

    def insert_entity(self, bank_id: int, name: str, seen: datetime, keys: Sequence[str]) -> int:
        (entity_id,) = self.conn.execute(
            "INSERT INTO entities(bank_id, name, first_seen, last_seen, mention_count) "
            "VALUES(%s, %s, %s, %s, 0) RETURNING id",
            (bank_id, name, iso(seen), iso(seen)),
        ).fetchone()
        self.add_entity_keys(entity_id, keys)
        return entity_id

    def add_entity_keys(self, entity_id: int, keys: Sequence[str]) -> None:
        if keys:
            self.conn.execute(
                "INSERT INTO entity_keys(key, entity_id) SELECT k, %s FROM unnest(%s::text[]) k "
                "ON CONFLICT DO NOTHING",
                (entity_id, list(keys)),
            )

    def add_entity_alias(self, entity_id: int, name: str, keys: Sequence[str]) -> None:
        row = self.conn.execute(
            "SELECT name, aliases FROM entities WHERE id = %s", (entity_id,)
        ).fetchone()
        aliases = json.loads(row[1])
        if name.lower() != row[0].lower() and name.lower() not in {a.lower() for a in aliases}:
            aliases.append(name)
            self.conn.execute(
                "UPDATE entities SET aliases = %s WHERE id = %s",
                (json.dumps(aliases, ensure_ascii=False), entity_id),
            )
            self.add_entity_keys(entity_id, keys)

    def entity_candidates(
        self, bank_id: int, keys: Sequence[str], limit: int = 50
    ) -> list[tuple[int, str, list[str], datetime | None]]:
        if not keys:
            return []
        rows = self.conn.execute(
            "SELECT e.id, e.name, e.aliases, e.last_seen FROM entity_keys k "
            "JOIN entities e ON e.id = k.entity_id WHERE k.key = ANY(%s) AND e.bank_id = %s "
            "GROUP BY e.id ORDER BY bool_or(k.key = %s) DESC, e.mention_count DESC, e.id "
            "LIMIT %s",
            (list(keys), bank_id, keys[0], limit),
        ).fetchall()
        return [
            (eid, name, json.loads(aliases), datetime.fromisoformat(last) if last else None)
            for eid, name, aliases, last in rows
        ]

    def cooccurring_entities(self, entity_id: int, recent_facts: int = 200) -> set[int]:
        return {
            r[0]
            for r in self.conn.execute(
                "SELECT DISTINCT b.entity_id FROM (SELECT fact_id FROM fact_entities "
                "WHERE entity_id = %s ORDER BY fact_id DESC LIMIT %s) a "
                "JOIN fact_entities b ON a.fact_id = b.fact_id WHERE b.entity_id != %s",
                (entity_id, recent_facts, entity_id),
            )
        }

    def mention_entity(self, fact_id: int, entity_id: int, seen: datetime) -> None:
        when = iso(seen)
        # One round trip: the mention, and the entity's count and times when it is new.
        self.conn.execute(
            "WITH m AS (INSERT INTO fact_entities(fact_id, entity_id) VALUES(%s, %s) "
            "ON CONFLICT DO NOTHING RETURNING entity_id) "
            "UPDATE entities SET mention_count = mention_count + 1, "
            "last_seen = greatest(coalesce(last_seen, %s), %s), "
            "first_seen = least(coalesce(first_seen, %s), %s) "
            "WHERE id = (SELECT entity_id FROM m)",
            (fact_id, entity_id, when, when, when, when),
        )

    def entity_fact_count(self, entity_id: int) -> int:
        return self.conn.execute(
            "SELECT count(*) FROM fact_entities WHERE entity_id = %s", (entity_id,)
        ).fetchone()[0]

    def entities_of_facts(self, fact_ids: Sequence[int]) -> list[tuple[int, int]]:
        if not fact_ids:
            return []
        return self.conn.execute(
            "SELECT fact_id, entity_id FROM fact_entities WHERE fact_id = ANY(%s) "
            "ORDER BY fact_id, entity_id",
            ([int(i) for i in fact_ids],),
        ).fetchall()

    def entity_expansions(
        self, entity_ids: Sequence[int], bank_id: int, limit: int
    ) -> dict[int, tuple[int, list[int]]]:
        if not entity_ids:
            return {}
        rows = self.conn.execute(
            "SELECT j.e, (SELECT count(*) FROM fact_entities WHERE entity_id = j.e), "
            "ARRAY(SELECT fe.fact_id FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id "
            "WHERE fe.entity_id = j.e AND f.bank_id = %s ORDER BY fe.fact_id DESC LIMIT %s) "
            "FROM unnest(%s::bigint[]) AS j(e)",
            (bank_id, limit, list(dict.fromkeys(int(e) for e in entity_ids))),
        ).fetchall()
        return {entity: (count, list(ids)) for entity, count, ids in rows}

    def entity_names_of(self, fact_ids: Sequence[int]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        if not fact_ids:
            return out
        for fid, name in self.conn.execute(
            "SELECT fe.fact_id, e.name FROM fact_entities fe JOIN entities e "
            'ON e.id = fe.entity_id WHERE fe.fact_id = ANY(%s) ORDER BY e.name COLLATE "C"',
            ([int(i) for i in fact_ids],),
        ):
            out.setdefault(fid, []).append(name)
        return out

    def fact_entity_rows(self, fact_id: int) -> list[tuple[int, str, list[str]]]:
        return [
            (eid, name, json.loads(aliases))
            for eid, name, aliases in self.conn.execute(
                "SELECT e.id, e.name, e.aliases FROM fact_entities fe "
                "JOIN entities e ON e.id = fe.entity_id WHERE fe.fact_id = %s "
                'ORDER BY e.name COLLATE "C"',
                (fact_id,),
            )
        ]
