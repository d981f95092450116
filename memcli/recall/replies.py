"""Reply propagation: in a conversation the answer is often the turn after the question.

A question like "So, where are you going to stay?" shares the query's words and topic more
than its answer ("At my aunt's place in Boston") does, so the arms rank the question first.
Each candidate whose preceding fact asks a question (has a "?"), was said by another speaker
(both facts have a context and they differ) in the same document (or both in none) at most
reply_max_gap_hours earlier, gains
`reply_share` x that question's fusion score; candidates are then put back in fusion order.
This is the recall-time half of the lead-in (retain.py embeds and indexes each reply with
what it answers), which alone left the question above its answer.

Measured on LoCoMo (bench/RESULTS.md): share 0.2 / 0.3 / 0.4 -> MRR 0.608 / 0.614 / 0.610
from 0.586; passing a share from every preceding fact, not only questions, lost (0.572).
Requiring another speaker costs nothing there (0.613) and keeps a note-taker's own string of
notes (one context, or none) from being read as questions and answers.
"""

from __future__ import annotations

from memcli.recall import fusion
from memcli.recall.types import Candidate
from memcli.settings import RecallSettings
from memcli.store.protocol import StoreProtocol


def propagate(
    store: StoreProtocol, candidates: list[Candidate], settings: RecallSettings
) -> list[Candidate]:
    share = settings.reply_share
    if share <= 0 or not candidates:
        return candidates
    by_id = {c.fact_id: c for c in candidates}
    # Asked from the questions' side: the fact after each candidate question (a tenth of
    # the candidates), not the fact before each of the ~700 candidates.
    questions = [
        c.fact_id for c in candidates if c.fused > 0 and c.fact.context and "?" in c.fact.text
    ]
    gains = {}
    for qid, fid in store.facts.next_facts(questions, settings.reply_max_gap_hours).items():
        question, reply = by_id[qid], by_id.get(fid)
        if reply is not None and reply.fact.context and question.fact.context != reply.fact.context:
            gains[fid] = share * question.fused
    for fid, gain in gains.items():
        by_id[fid].reply = gain
        by_id[fid].fused += gain
    return fusion.in_fusion_order(candidates)
