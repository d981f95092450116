"""Fact type and tag filters, as SQL over `facts f` so that arms filter before they truncate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memcli.store import Store


@dataclass(frozen=True)
class FactFilter:
    types: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    tags_match: str = "any"

    @property
    def active(self) -> bool:
        return bool(self.types) or bool(self.tags)

    def sql(self, alias: str = "f") -> tuple[str, list]:
        """A condition (starting with AND, or empty) and its parameters."""
        parts: list[str] = []
        params: list = []
        if self.types:
            parts.append(f"{alias}.fact_type IN ({','.join('?' * len(self.types))})")
            params.extend(self.types)
        if self.tags:
            tags = sorted(set(self.tags))
            marks = ",".join("?" * len(tags))
            untagged = f"NOT EXISTS (SELECT 1 FROM fact_tags t WHERE t.fact_id = {alias}.id)"
            matched = (
                f"(SELECT count(DISTINCT t.tag) FROM fact_tags t "
                f"WHERE t.fact_id = {alias}.id AND t.tag IN ({marks}))"
            )
            total = f"(SELECT count(*) FROM fact_tags t WHERE t.fact_id = {alias}.id)"
            mode = self.tags_match
            if mode == "any":
                parts.append(f"({untagged} OR {matched} > 0)")
            elif mode == "all":
                parts.append(f"({untagged} OR {matched} = {len(tags)})")
            elif mode == "any_strict":
                parts.append(f"{matched} > 0")
            elif mode == "all_strict":
                parts.append(f"{matched} = {len(tags)}")
            elif mode == "exact":
                parts.append(f"({matched} = {len(tags)} AND {total} = {len(tags)})")
            else:
                raise ValueError(f"unknown tags match mode {mode!r}")
            params.extend(tags)
        if not parts:
            return "", []
        return " AND " + " AND ".join(parts), params

    def allowed(self, store: Store, fact_ids: Sequence[int]) -> set[int]:
        """The subset of fact_ids that pass (for arms whose index cannot filter, like vec0)."""
        if not self.active:
            return set(fact_ids)
        cond, params = self.sql()
        out: set[int] = set()
        ids = list(fact_ids)
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            marks = ",".join("?" * len(batch))
            out.update(
                r[0]
                for r in store.conn.execute(
                    f"SELECT f.id FROM facts f WHERE f.id IN ({marks}){cond}", (*batch, *params)
                )
            )
        return out
