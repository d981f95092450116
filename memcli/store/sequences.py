"""Facts in the order they were said: the neighbours of a fact in its conversation.

A retain call stores items in order, so within one bank and one document (or among the facts
of no document) consecutive fact ids are consecutive things said; the reply relation
(recall/replies.py) reads the same order. The document arm (recall/document.py) reads a few
facts on each side of its seeds, by id range on the primary key: no index or table of its
own, so nothing here can go stale when facts are forgotten, corrected or replaced.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memcli.store.types import parse_iso


class SequencesMixin:
    conn: Any

    def fact_neighbourhoods(
        self, bank_id: int, fact_ids: Sequence[int], radius: int
    ) -> list[tuple[int, int | None, datetime]]:
        """Every fact of the bank whose id is within `radius` of one of fact_ids, as (id,
        document row, said at), in id order. One statement: a range probe of the primary key
        per seed."""
        if not fact_ids or radius < 0:
            return []
        rows = self.conn.execute(
            "SELECT DISTINCT f.id, f.document_id, f.mentioned_at FROM json_each(?) AS j "
            "JOIN facts f ON f.id BETWEEN j.value - ? AND j.value + ? "
            "WHERE f.bank_id = ? ORDER BY f.id",
            (json.dumps(list(fact_ids)), int(radius), int(radius), bank_id),
        ).fetchall()
        return [(fid, doc, parse_iso(said)) for fid, doc, said in rows]

    def fact_vectors(self, bank_id: int, fact_ids: Sequence[int]) -> Any:
        """The stored vectors of these facts of the bank (a row of zeros for one that has
        none), read through the bank's scan (store/vectors.py), which keeps the ones a
        search just read; None when the vector table is not laid out for it."""
        import numpy as np

        scan = self._bank_scan(bank_id) if self.has_vectors() else None  # type: ignore[attr-defined]
        if scan is None:
            return None
        rows = scan.rows_of(list(fact_ids))
        out = np.zeros((len(fact_ids), scan.dim), dtype=np.float32)
        have = [i for i, f in enumerate(fact_ids) if f in rows]
        if have:
            found = scan.floats(np.array([rows[fact_ids[i]] for i in have]), self.conn)
            out[have] = found
        return out
