"""Every tunable constant of retain and recall, with the reference design's defaults.

Recall prints these in `--trace`, so what ran is always visible. See the design note
(recall-pipeline.md) for where each number comes from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Candidates per arm for each budget, and how many fused candidates go to the cross-encoder.
# The rerank cap scales with the budget so that `mid` stays near 2 s on 2 CPU cores for a
# MiniLM-sized cross-encoder (~30-150 pairs/s there).
BUDGETS = {"low": 100, "mid": 300, "high": 1000}
RERANK_CAPS = {"low": 20, "mid": 50, "high": 150}


@dataclass(frozen=True)
class RecallSettings:
    rrf_k: int = 60
    # Rank-space weight per arm: an arm contributes 1 / (rrf_k + rank / weight).
    arm_weights: dict[str, float] = field(
        default_factory=lambda: {
            "semantic": 1.0,
            "keyword": 1.0,
            "graph": 1.0,
            "temporal": 1.0,
            "document": 1.0,
        }
    )
    semantic_min_limit: int = 20
    # Cosine below which the semantic arm lists nothing. Not a relevance test (the floor of
    # recall/floor.py is): 0.3, the reference design's, cut e5's answers to questions asked
    # in another language (some at cosines 0.24-0.30) and shortened the list fusion scales
    # by. At
    # 0.2: LoCoMo 0.815 / 0.671 -> 0.817 / 0.670 (MiniLM 0.804 / 0.640 -> 0.809 / 0.650),
    # CJK chat 0.919 / 0.753 -> 0.933 / 0.757, CJK and LongMemEval S equal (bench/RESULTS.md).
    semantic_floor: float = 0.2
    # The facts the search of sentence vectors adds to the semantic arm's list (the best of
    # them; a sentence's cosine counts where it beats its fact's own). A sentence decides a
    # fact's place near the top: at 100 (or 50) instead of the arm's whole 300 every dev set
    # ranks the same but LoCoMo's MRR (0.6902 -> 0.6893), and at 200k sentences a query
    # reads a third of the floats (bench/sentence_scan.py: 8 ms warm, 16 cold, against 13
    # and 31; bench/RESULTS.md, tenth session).
    semantic_sentence_limit: int = 100
    keyword_max_terms: int = 16
    # How a CJK run in a query becomes keyword terms: both (characters + pairs), bigram,
    # unigram or trigram; see fts.py.
    keyword_cjk_terms: str = "both"
    # A single CJK character in more than this share of all facts (and more than the count) is
    # no keyword term: it ranks almost nothing and costs a walk over most of the index.
    keyword_cjk_char_max_share: float = 0.1
    keyword_cjk_char_min_count: int = 1000
    graph_seeds: int = 20
    graph_seed_floor: float = 0.3
    graph_facts_per_entity: int = 200
    temporal_pool: int = 60
    temporal_pool_floor: float = 0.1
    temporal_entry_points: int = 10
    temporal_buckets: int = 8
    temporal_rounds: int = 5
    temporal_nodes_per_round: int = 20
    temporal_neighbours: int = 10
    temporal_spread_factor: float = 0.7
    temporal_expand_floor: float = 0.2
    # The document arm (recall/document.py): a window of up to document_radius facts on each
    # side of each of the best document_seeds semantic hits, in one sitting (each said at most
    # document_gap_hours after the one before, same document or none); 0 turns it off.
    document_seeds: int = 50
    document_radius: int = 2
    document_gap_hours: float = 6.0
    # Newer memories gain up to +2.5% (older lose as much): a tie-breaker. At 0.2 (+-10%,
    # the reference design's) it cost MRR on three of the four dev sets; fit on the sets
    # together, each held-out one took 0 or 0.05 (bench/RESULTS.md).
    recency_alpha: float = 0.05
    recency_horizon_days: float = 365.0
    temporal_alpha: float = 0.2
    # A question that asks when ("When did I ...?") and names no time of its own: a memory
    # that says a time (a time phrase retain dated it by) gets 1 + alpha/2, one that does not
    # 1 - alpha/2; see recall/scoring.py. 0.2: the scale of the temporal boost.
    when_alpha: float = 0.2
    proof_alpha: float = 0.1
    # When the query names a speaker (a fact's context), that speaker's memories get
    # 1 + alpha/2 and everyone else's 1 - alpha/2; see recall/scoring.py. 0.4: fit on the dev
    # sets together, each held-out set gaining (bench/fit_fusion.py, bench/RESULTS.md).
    speaker_alpha: float = 0.4
    # A query that names a speaker searches by the mean of its vector and its vector without
    # the names, this share of the latter (0: the whole query only); see
    # scoring.without_names.
    unnamed_query_share: float = 0.5
    # Base score without a reranker: "fused" (share of the best fusion score) or "linear"
    # (the reference's 1 - 0.9 x rank / (n - 1)); see recall/rerank.py.
    synthetic: str = "fused"
    # Candidate order: "scores" (weighted min-max score fusion) or "rrf"; see recall/fusion.py.
    fusion: str = "scores"
    score_weights: dict[str, float] = field(
        default_factory=lambda: {
            "semantic": 1.0,
            "keyword": 1.0,
            "graph": 0.2,
            "temporal": 0.4,
            "document": 0.3,
        }
    )
    # A CJK query: an English-only embedder's vector arms, and (with a multilingual embedder)
    # the character n-gram keyword arm, weigh this much at 100% CJK; see recall/fusion.py.
    cjk_weak_embedder_factor: float = 0.25
    cjk_keyword_factor: float = 0.4
    # A query that is all time words ("what did I do yesterday?") gives the temporal arm (the
    # facts of that time) this fusion weight; one that is partly time, a share in between;
    # see recall/fusion.py.
    time_query_temporal_weight: float = 3.0

    # The relevance floor (recall/floor.py): a question passes when a candidate's cosine to
    # the query reaches floor_cosine (None: the embedder's calibrated question floor, and its
    # floor across scripts; given, one floor for every candidate; 0: no floor) or its own
    # words hold floor_keyword_coverage of the query's terms.
    floor_cosine: float | None = None
    floor_keyword_coverage: float = 1.0
    # Once one candidate reaches the floor (the question is about something said), others
    # are shown down to this share of it (None: the embedder's calibrated item floor, or 1
    # with floor_cosine given; recall/floor.py).
    floor_item_share: float | None = None

    # A reply gains this share of the fusion score of the fact said just before it (same
    # document, another speaker, at most reply_max_gap_hours earlier) when that fact asks a
    # question ("?"); see recall/replies.py. 0 turns it off.
    reply_share: float = 0.3
    reply_max_gap_hours: float = 6.0

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RetainSettings:
    semantic_link_top: int = 50
    # Cosine at which a new fact links to an earlier one (None: the embedder's, from
    # retain.SEMANTIC_LINK_FLOORS).
    semantic_link_floor: float | None = None
    temporal_link_per_side: int = 20
    # The reference links facts any distance apart (weight floor 0.3); we stop at a week.
    temporal_link_max_hours: float = 24.0 * 7
    temporal_link_floor: float = 0.3
    # A text up to this many words stays one fact (a dialog turn, a note); longer text is
    # split into sentence groups of about this size.
    fact_max_words: int = 60
    chunk_max_words: int = 350
    batch_items: int = 64
    # Words of the previous item (same retain call, same document, at most this many hours
    # apart) embedded with each fact as its lead-in; 0 turns lead-ins off.
    lead_in_words: int = 40
    lead_in_max_gap_hours: float = 6.0
