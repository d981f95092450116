"""Reply propagation: in a conversation the answer is often the turn after the question.

A question like "So, where are you going to stay?" shares the query's words and topic more
than its answer ("At my aunt's place in Boston") does, so the arms rank the question first.
Each candidate whose preceding fact (same document, said at most reply_max_gap_hours earlier)
asks a question gains `reply_share` x that question's fusion score, and candidates are put back
in fusion order. It is the recall-time half of the lead-in (retain.py embeds and indexes each
reply with what it answers); the arms still see the question first because it is shorter.

Measured on LoCoMo (bench/RESULTS.md): share 0.2 / 0.3 / 0.4 -> MRR 0.608 / 0.614 / 0.610
from 0.586; passing a share from every preceding fact, not only questions, lost (0.572).
"""

from __future__ import annotations

from memcli.recall.types import Candidate
from memcli.settings import RecallSettings
from memcli.store import Store


def propagate(
    store: Store, candidates: list[Candidate], settings: RecallSettings
) -> list[Candidate]:
    share = settings.reply_share
    if share <= 0 or not candidates:
        return candidates
    by_id = {c.fact_id: c for c in candidates}
    previous = store.previous_facts(list(by_id), settings.reply_max_gap_hours)
    gains = {}
    for fid, prev in previous.items():
        question = by_id.get(prev)
        if question is not None and question.fused > 0 and "?" in question.fact.text:
            gains[fid] = share * question.fused
    for fid, gain in gains.items():
        by_id[fid].reply = gain
        by_id[fid].fused += gain
    ordered = sorted(candidates, key=lambda c: (-c.fused, -c.rrf, c.fact_id))
    for i, cand in enumerate(ordered, start=1):
        cand.rrf_rank = i
    return ordered
