"""What recall may return: fact types, tags, validity. The SQL for it lives in the store
(store/search.py); arms pass a FactFilter to the store's reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memcli.store.protocol import StoreProtocol


@dataclass(frozen=True)
class FactFilter:
    types: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    tags_match: str = "any"
    # Facts a correction has closed are skipped unless asked for (list --include-invalid).
    valid_only: bool = True
    # Answer as the store stood at this time (recorded by then, not yet closed by then).
    as_of: datetime | None = None

    def allowed(
        self, store: StoreProtocol, fact_ids: Sequence[int], bank_id: int | None = None
    ) -> set[int]:
        """The subset of fact_ids that pass (for arms whose index cannot filter, like vec0)."""
        return store.search.filter_facts(fact_ids, self, bank_id)

    def first_allowed(
        self, store: StoreProtocol, ordered: Sequence[int], limit: int, bank_id: int | None = None
    ) -> list[int]:
        """The first `limit` of `ordered` (best first) that pass, checked only as far as
        needed (store.search.first_passing): the graph arm scores a few thousand facts and keeps
        300; checking them all was ~2-4 ms of a 100k-fact recall."""
        return store.search.first_passing(ordered, self, bank_id, limit)
