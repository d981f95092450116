"""Fact embeddings in one sqlite-vec table (cosine), partitioned by bank.

Each row holds the float vector and its sign bits (bit[dim], 48 bytes for 384 dims). vec0
has no index: a KNN query reads the whole bank, and its cost grows with k as well (a k of
several hundred, what the semantic arm asks for, costs more than the scan itself). So a
search reads the bank's sign bits straight from vec0's chunk tables (a few 48 KB blobs for
100k facts; layout of sqlite-vec 0.1.9, checked when read, else vec0's own KNN is used),
ranks them by Hamming distance in numpy, and ranks the best few times k candidates by the exact
cosine of their float vectors, read by offset from vec0's float chunks. The scan of a bank is
cached per connection until the file changes. Files from before the bits column (schema 3)
get it in migration 4.

Every bank records the embedder that made its vectors (banks.embedder, written and read
here), by fingerprint (a hash of the model's weights, not its file name): vectors of two
models in one bank would be silently meaningless, so a mismatch is an error that names the
fix.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memcli.store.core import StoreCore
from memcli.store.protocol import FactFilterLike
from memcli.store.search import SearchPart, _id_array, filter_active
from memcli.store.types import FACT_TYPES, StoreError, batched, marks
from memcli.store.vector_format import HALF, half_sign_bits, sign_bits, vector_table_sql

# Candidates read from the bits per result wanted (measured on MiniLM over 30k real sentences):
# see prefilter_candidates and shortlist_sizes.
PREFILTER_FACTOR = 4
PREFILTER_EXTRA = 64
VEC0_MAX_K = 4096  # sqlite-vec refuses a larger k


def hamming_reach(dim: int, floor: float, margin: float = 4.0) -> int:
    """The largest sign-bit Hamming distance at which two vectors may still have a cosine of
    `floor`: a random hyperplane splits two vectors at angle t with probability t / pi, so
    their distance over dim bits is about dim * t / pi, with a spread of sqrt(dim p (1 - p));
    `margin` spreads above it. For MiniLM (384 bits) at 0.7: 132; measured on 6,000 real
    sentences (18M pairs), no pair at or above 0.7 was farther than 124. A floor of -1 or
    below reaches every distance."""
    if floor <= -1.0:
        return dim
    p = math.acos(min(1.0, floor)) / math.pi
    return min(dim, math.ceil(dim * p + margin * math.sqrt(dim * p * (1 - p))))


def prefilter_candidates(k: int) -> int:
    """How many nearest by Hamming distance to rank by cosine, for k results (vec0's own
    KNN, and the temporal arm's search of a window, whose probe checks four times as many
    rows against the window: a wider shortlist would double that)."""
    return min(VEC0_MAX_K, max(k * PREFILTER_FACTOR, k + PREFILTER_EXTRA))


def shortlist_sizes(k: int) -> tuple[int, int]:
    """For k results: how many rows to take by Hamming distance, and how many of those to
    keep by the query's float vector against their sign bits (asymmetric distance) for the
    exact cosine. The float reads are most of the cost (a b-tree probe and, in a big bank,
    a page read each) and the share kept decides what is found: over the 30 warm queries of
    the scale bench at 100k facts, all fact types searched at once, the exact top 300 was
    found 0.913 of the time keeping 2 k of 16 k rows, 0.957 keeping 3 k of 16 k, 0.960 of
    32 k (what searching each of two fact types for its own top k found, reading twice the
    floats: 0.957). At 10k and 30k facts 3 k of 16 k found 0.967 and 0.956."""
    return 4 * prefilter_candidates(k), max(3 * k, k + PREFILTER_EXTRA)


def same_model_name(recorded: str, name: str) -> bool:
    """Whether a bank's recorded embedder name (from before fingerprints) means this model.
    Older versions recorded the file stem of the converted cache ("all-MiniLM-L6-v2-53aa51172d14
    -f16"), today's record the model's own name ("all-MiniLM-L6-v2")."""
    return recorded == name or recorded.startswith(name + "-")


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique of a 1-d integer array. numpy 2's own imports numpy.ma on first use (~14 ms
    of every cold recall) to ask whether the array is masked."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


# Bit i of each byte value (least significant first, as sign_bits packs them), as floats.
_BYTE_BITS = np.unpackbits(
    np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little"
).astype(np.float32)


class BankScan:
    """One bank's vectors as vec0 (0.1.9) keeps them: for every live row its fact id, chunk
    and offset, its fact type, and its sign bits as 64-bit words (one row per word, so the
    Hamming distance is a few vectorised passes)."""

    # The floats of rows by id (json_each of the ids, the byte width), as one row: the ids
    # found and their half-precision vectors end to end.
    FLOATS_SQL = (
        "SELECT group_concat(a.rowid), CAST(group_concat(a.value00, '') AS BLOB) "
        "FROM json_each(?) AS j JOIN fact_vec_auxiliary AS a ON a.rowid = j.value "
        "WHERE length(a.value00) = ?"
    )

    def __init__(self, conn: Any, bank_id: int, dim: int) -> None:
        self.dim = dim
        self.conn = conn
        nbytes = dim // 8
        word_type = np.uint64 if nbytes % 8 == 0 else np.uint8
        valid: list[np.ndarray] = []
        ids: list[bytes] = []
        bits: list[bytes] = []
        cells: list[bytes] = []
        # Three reads, not one join: vec0 declares its chunk tables' "rowid" as a plain
        # column, so the planner scanned one inside the other and sorted all the blobs
        # (10-20 ms at 100k facts against ~3 ms).
        bit_chunks = _chunk_blobs(conn, "fact_vec_vector_chunks00", "vectors", bank_id)
        meta_chunks = _chunk_blobs(conn, "fact_vec_metadatachunks00", "data", bank_id)
        for chunk_id, size, validity, rowids in conn.execute(
            "SELECT chunk_id, size, validity, rowids FROM fact_vec_chunks "
            "WHERE partition00 = ? ORDER BY chunk_id",
            (bank_id,),
        ):
            vectors = bit_chunks.get(chunk_id)
            meta = meta_chunks.get(chunk_id)
            if vectors is None or meta is None:
                raise _LayoutError(f"chunk {chunk_id} has no vectors or metadata")
            if (
                len(rowids) != 8 * size
                or len(vectors) != size * nbytes
                or len(meta) != 16 * size
                or len(validity) * 8 < size
            ):
                raise _LayoutError(f"unexpected vec0 chunk layout in chunk {chunk_id}")
            flags = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
            valid.append(flags[:size].astype(bool))
            ids.append(rowids)
            bits.append(vectors)
            cells.append(meta)
        live_rows = np.concatenate(valid) if valid else np.zeros(0, dtype=bool)
        # Most banks have no deleted rows: a slice then copies nothing.
        live = slice(None) if live_rows.all() else live_rows
        self.ids = np.frombuffer(b"".join(ids), dtype="<i8")[live]
        packed = np.frombuffer(b"".join(bits), dtype=np.uint8).reshape(-1, nbytes)[live]
        # (words, rows): word w of every row is contiguous, for the Hamming passes.
        self.words = np.ascontiguousarray(packed.view(word_type).T)
        self.word_type = word_type
        # A text metadata cell is an int32 length and the text's first 12 bytes; its first
        # 8 bytes tell the fact types apart.
        keys = np.frombuffer(b"".join(cells), dtype="<u8").reshape(-1, 2)[:, 0][live]
        self.types = np.full(len(keys), -1, dtype=np.int8)
        for code, name in enumerate(FACT_TYPES):
            raw = len(name).to_bytes(4, "little") + name.encode()[:4].ljust(4, b"\0")
            self.types[keys == int.from_bytes(raw, "little")] = code
        if (self.types < 0).any():
            raise _LayoutError("unexpected fact type in vec0 metadata")
        self._start_caches()

    def _start_caches(self) -> None:
        """The state a scan keeps between queries, empty."""
        self._order: np.ndarray | None = None
        self._last: tuple[bytes, np.ndarray] | None = None
        self._type_rows: dict[tuple[int, ...], np.ndarray] = {}
        # Floats read so far, packed in reading order: slot[row] is the row's place in
        # kept (-1: not read). A dense (rows x dim) array touched at random rows made the OS
        # hand over pages all across it: ~250 ms of the first query at 100k facts.
        self._slot: np.ndarray | None = None
        self._kept = np.zeros((0, self.dim), dtype=HALF)
        self._kept_count = 0
        self._lock = threading.Lock()
        self._hamming_lock = threading.Lock()
        self._scratch: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def extend(self, rows: Sequence[tuple[int, str, bytes]]) -> None:
        """Add rows this connection wrote after the scan was read, as (fact id, fact type,
        sign bits): a retain's later batches search its earlier ones without reading the
        whole bank again (~25 ms a batch at 100k facts)."""
        if not rows:
            return
        nbytes = self.dim // 8
        packed = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.uint8).reshape(-1, nbytes)
        self.ids = np.concatenate([self.ids, np.array([r[0] for r in rows], dtype="<i8")])
        self.words = np.concatenate(
            [self.words, np.ascontiguousarray(packed.view(self.word_type).T)], axis=1
        )
        codes = np.array([FACT_TYPES.index(r[1]) for r in rows], dtype=np.int8)
        self.types = np.concatenate([self.types, codes])
        if self._slot is not None:
            self._slot = np.concatenate([self._slot, np.full(len(rows), -1, dtype=np.int64)])
        self._order = None
        self._last = None
        self._type_rows = {}

    def rows_of_types(self, fact_types: Sequence[str]) -> np.ndarray:
        """The rows of these fact types, in row order (kept: a query asks again)."""
        codes = tuple(sorted({FACT_TYPES.index(t) for t in fact_types}))
        rows = self._type_rows.get(codes)
        if rows is None:
            rows = self._type_rows[codes] = np.flatnonzero(np.isin(self.types, codes))
        return rows

    def sign_dots(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The dot product of the query with each row's sign bits taken as 0 and 1: per byte
        of the bits, a table of the query's sums over its 256 values, so a row costs one
        lookup a byte (2,400 rows: 0.31 ms, against 0.51 unpacking the bits to floats)."""
        nbytes = self.dim // 8
        packed = np.ascontiguousarray(self.words[:, rows].T).view(np.uint8).reshape(-1, nbytes)
        sums = _BYTE_BITS @ np.asarray(query, dtype=np.float32).reshape(nbytes, 8).T
        flat = sums.T.reshape(-1)  # byte j's value b at j * 256 + b
        return flat[packed + np.arange(0, 256 * nbytes, 256, dtype=np.intp)].sum(axis=1)

    def query_words(self, packed: bytes) -> np.ndarray:
        return np.frombuffer(packed, dtype=np.uint8).view(self.word_type)

    def hamming(self, query: np.ndarray) -> np.ndarray:
        """Hamming distance of every row to the query's sign bits (the last query's kept:
        the semantic and temporal arms ask for the same query, from two threads at once;
        the second waits for the first's pass instead of making its own)."""
        key = query.tobytes()
        with self._hamming_lock:
            if self._last is not None and self._last[0] == key:
                return self._last[1]
            # One word of every row at a time into scratch arrays of one row's length, that
            # stay in the core's cache (the whole (words x rows) at once: 0.63 ms at 100k
            # facts, this way 0.47).
            rows = self.words.shape[1]
            if self._scratch is None or len(self._scratch[0]) != rows:
                self._scratch = (np.empty(rows, self.word_type), np.empty(rows, np.uint8))
            xored, counts = self._scratch
            out = np.zeros(rows, dtype=np.uint16)
            for word, bits in zip(self.words, query):
                np.bitwise_xor(word, bits, out=xored)
                np.bitwise_count(xored, out=counts)
                np.add(out, counts, out=out)
            self._last = (key, out)
            return out

    def floats(self, rows: np.ndarray, conn: Any) -> np.ndarray:
        """The float vectors of these rows (vec0's auxiliary table, by fact id), read on
        `conn`: the scan's own connection, or another one's that searches with it from a
        second thread (the rows kept are guarded by a lock, the reading is not). Rows read
        once are kept (half precision) while the scan lives, so the queries of a `--batch`
        do not read the same popular facts again."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.empty((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._slot is None:
                self._slot = np.full(len(self.ids), -1, dtype=np.int64)
            need = sorted_unique(rows[self._slot[rows] < 0])
        if len(need):
            ids = self.ids[need]
            width = self.dim * 2
            # One statement for all of them, probed in id order (json_each: no parameter
            # limit, and half the cost of IN lists of 500), answered as one row: the ids
            # found and their vectors end to end. apsw hands the GIL back at every row it
            # steps, and a row per vector beside another thread of recall took 7.2 ms for
            # 900 vectors where one row takes 1.6 (1.9 a row each, alone).
            found_ids, joined = conn.execute(
                self.FLOATS_SQL, (json.dumps(np.sort(ids).tolist()), width)
            ).fetchone()
            found = _id_array(found_ids)
            if len(joined or b"") != width * len(found):
                raise StoreError("the vector table returned vectors of an unexpected size")
            vectors = np.frombuffer(joined or b"", dtype=HALF).reshape(len(found), self.dim)
            # The two lists come in one order, whichever SQLite took: sorted by id together.
            by_id = np.argsort(found, kind="stable")
            found, vectors = found[by_id], vectors[by_id]
            # A fact another process deleted since the scan was read has no row any more:
            # its vector reads as zeros (cosine 0, below every floor), and is not kept.
            at = np.searchsorted(found, ids)
            hit = at < len(found)
            hit[hit] = found[at[hit]] == ids[hit]
            gone = ~hit
            read = np.zeros((len(need), self.dim), dtype=HALF)
            read[hit] = vectors[at[hit]]
            with self._lock:
                self._keep(need[~gone], read[~gone])
                if gone.any():
                    out = np.zeros((len(rows), self.dim), dtype=np.float32)
                    known = self._slot[rows] >= 0
                    out[known] = self._kept[self._slot[rows[known]]]
                    return out
        with self._lock:
            return self._kept[self._slot[rows]].astype(np.float32)

    def _keep(self, rows: np.ndarray, halves: np.ndarray) -> None:
        """Append these rows' floats to the kept ones; rows another thread kept meanwhile
        are skipped. Call with the lock held. The first keep reserves room for every row of
        the bank: address space only, filled front to back as rows are kept, so memory
        grows with what was read and nothing is ever copied (doubling a packed array as it
        filled was ~1 ms a query over a 30-query batch at 100k facts)."""
        fresh = self._slot[rows] < 0
        if not fresh.all():
            rows, halves = rows[fresh], halves[fresh]
        end = self._kept_count + len(rows)
        if end > len(self._kept):
            # Rows this connection added since (extend) can pass the first reservation.
            grown = np.empty((max(end, len(self.ids), 2 * len(self._kept)), self.dim), dtype=HALF)
            grown[: self._kept_count] = self._kept[: self._kept_count]
            self._kept = grown
        self._kept[self._kept_count : end] = halves
        self._slot[rows] = np.arange(self._kept_count, end)
        self._kept_count = end

    def rows_of(self, fact_ids: Sequence[int]) -> dict[int, int]:
        """fact id -> row, for the ids this bank holds."""
        wanted, rows = self._found_rows(fact_ids)
        return dict(zip(wanted.tolist(), rows.tolist()))

    def rows_array(self, fact_ids: Sequence[int]) -> np.ndarray:
        """The rows of the ids this bank holds, as an array: a time window's tens of
        thousands of facts are looked up without a Python loop."""
        return self._found_rows(fact_ids)[1]

    def _found_rows(self, fact_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(ids this bank holds, their rows), in the order asked."""
        if self._order is None:
            self._order = np.argsort(self.ids, kind="stable")
        wanted = np.asarray(fact_ids, dtype=np.int64)
        if not len(wanted) or not len(self.ids):
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        sorted_ids = self.ids[self._order]
        pos = np.minimum(np.searchsorted(sorted_ids, wanted), len(sorted_ids) - 1)
        hit = sorted_ids[pos] == wanted
        return wanted[hit], self._order[pos[hit]]


def _chunk_blobs(conn: Any, table: str, column: str, bank_id: int) -> dict[int, bytes]:
    """chunk id -> its blob in one of vec0's chunk tables, for the bank's chunks."""
    return dict(
        conn.execute(
            f"SELECT rowid, {column} FROM {table} "
            "WHERE rowid IN (SELECT chunk_id FROM fact_vec_chunks WHERE partition00 = ?)",
            (bank_id,),
        )
    )


@dataclass
class _CachedScan:
    """A bank's scan, the data_version it was read at, and the rows this connection wrote
    to the bank since (fact id, fact type, sign bits), not yet in the scan."""

    data_version: int
    scan: BankScan
    written: list[tuple[int, str, bytes]] = field(default_factory=list)


class _LayoutError(Exception):
    """vec0's storage is not laid out as this code reads it (another sqlite-vec)."""


def _worth_probing(
    store: Any,
    bank_id: int,
    scan: BankScan,
    want: int,
    start: datetime,
    end: datetime,
    said: tuple[datetime, datetime] | None,
) -> bool:
    """Whether nearest_in_window should probe before it lists. The probe itself lists once
    the window's share s of the rows it checked is below sqrt(10 want / total) (a listed fact
    costs a tenth of a checked one); a window holding fewer facts than that share of the
    bank is listed at once, without a probe that was bound to give up (a month of a 30k-fact
    bank: ~3 ms of a 15 ms temporal arm). The facts that start inside the window are counted
    on the time index, up to the count that decides."""
    total = len(scan)
    decisive = math.ceil(math.sqrt(10 * want * total))
    if decisive >= total:
        return True
    lo, hi = (start, end) if said is None else (min(start, said[0]), max(end, said[1]))
    return store.search.facts_starting_in(bank_id, lo, hi, decisive) >= decisive


def _blocked(
    distances: np.ndarray, shut: np.ndarray | None, late: np.ndarray, value: int
) -> np.ndarray:
    """distances (changed in place) with the rows no query may link to set to value."""
    if shut is not None:
        distances[shut] = value
    distances[late] = value
    return distances


def _smallest(values: np.ndarray, pool: np.ndarray | None, n: int) -> np.ndarray:
    """The n rows (of pool, or of all) with the smallest Hamming distances, in row order.
    Distances are small integers, so a histogram finds the cut in one pass, several times
    faster than argpartition over 100k rows."""
    subset = values if pool is None else values[pool]
    if len(subset) <= n:
        return np.arange(len(values)) if pool is None else pool
    cumulative = np.cumsum(np.bincount(subset))
    cut = int(np.searchsorted(cumulative, n))  # first distance whose count reaches n
    below = np.flatnonzero(subset < cut)
    at_cut = np.flatnonzero(subset == cut)[: n - len(below)]
    picked = np.sort(np.concatenate([below, at_cut]))
    return picked if pool is None else pool[picked]


def _first_passing(
    scan: BankScan,
    distances: np.ndarray,
    pool: np.ndarray | None,
    n: int,
    passes: Any,
) -> np.ndarray:
    """Of the first n rows (of pool, or of all) in (Hamming distance, row) order, those
    whose fact ids `passes` (ids -> set of ids) keeps, in that order."""
    nearest = _smallest(distances, pool, n)
    nearest = nearest[np.argsort(distances[nearest], kind="stable")]
    ids = scan.ids[nearest]
    kept = passes(ids.tolist())
    return nearest[np.isin(ids, np.fromiter(kept, dtype=np.int64, count=len(kept)))]


def _shortlist(
    scan: BankScan, distances: np.ndarray, pool: np.ndarray | None, k: int, query: np.ndarray
) -> np.ndarray:
    """The rows (of pool, or of all) whose float vectors to read for the k nearest, in row
    order: the nearest by Hamming distance, narrowed by the query's floats against their
    sign bits (shortlist_sizes). The float reads are most of a semantic search (a b-tree
    probe each); the narrowing is ~0.7 ms for the 4,800 rows of k = 300."""
    wide, keep = shortlist_sizes(k)
    picked = _smallest(distances, pool, wide)
    if len(picked) <= keep:
        return picked
    # The dot product with the 0/1 bits ranks as the one with the +-1 signs: the two differ
    # by the same sum of the query's elements for every row.
    closeness = scan.sign_dots(picked, query)
    return np.sort(picked[np.argsort(-closeness, kind="stable")[:keep]])


def _cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    # einsum, not `@`: a matrix-vector product this small is slower through BLAS, whose
    # threads fight for the cores of a busy machine (measured 20x slower under load).
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix) * float(np.dot(query, query)))
    return np.einsum("ij,j->i", matrix, query) / np.maximum(norms, 1e-12)


def _ranked_by_cosine(
    scan: BankScan, rows: np.ndarray, query: np.ndarray, k: int, conn: Any
) -> list[tuple[int, float]]:
    """The k of these rows nearest to the query by cosine, as (fact id, cosine), best first
    (ties: the order of rows)."""
    if not len(rows):
        return []
    cosines = _cosines(scan.floats(rows, conn), query)
    order = np.argsort(-cosines, kind="stable")[:k]
    return list(zip(scan.ids[rows[order]].tolist(), cosines[order].tolist()))


class SentenceMatrix:
    """One bank's sentence vectors in one matrix, searched exactly: row i is a sentence of
    fact ids[i], of fact type FACT_TYPES[types[i]], its vector normalised. For rows without
    sign bits (a file of schema 10 read as it is); SentenceScan searches the rest."""

    def __init__(self, ids: np.ndarray, types: np.ndarray, vectors: np.ndarray) -> None:
        self.ids = ids
        self.types = types
        norms = np.linalg.norm(vectors, axis=1, keepdims=True) if len(vectors) else None
        self.vectors = vectors / np.where(norms == 0, 1.0, norms) if norms is not None else vectors

    @property
    def nbytes(self) -> int:
        """Memory the matrix holds."""
        return self.ids.nbytes + self.types.nbytes + self.vectors.nbytes

    def nearest(
        self, vec: np.ndarray, k: int, fact_types: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """The k facts whose nearest sentence is nearest to vec: (fact id, cosine)."""
        if not len(self.ids) or k <= 0:
            return []
        query = np.asarray(vec, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        cosines = self.vectors @ (query / (norm or 1.0))
        if fact_types is not None and not set(FACT_TYPES) <= set(fact_types):
            codes = [FACT_TYPES.index(t) for t in fact_types if t in FACT_TYPES]
            cosines = np.where(np.isin(self.types, codes), cosines, -np.inf)
        # A fact has a few sentences: its best k usually lie among the best 4k rows.
        head = min(len(cosines), 4 * k)
        order = np.argpartition(-cosines, head - 1)[:head] if head < len(cosines) else None
        if order is None or len(np.unique(self.ids[order])) < k:
            order = np.arange(len(cosines))
        order = order[np.argsort(-cosines[order], kind="stable")]
        out: list[tuple[int, float]] = []
        seen: set[int] = set()
        for row in order.tolist():
            cosine = float(cosines[row])
            if cosine == -np.inf or len(out) >= k:
                break
            fact_id = int(self.ids[row])
            if fact_id not in seen:
                seen.add(fact_id)
                out.append((fact_id, cosine))
        return out


# A fact's sentences the sentence search's short list allows for: k facts are looked for
# among the rows of the best SENTENCE_ROWS_PER_FACT x k sentences (LoCoMo's turns of two or
# more long sentences hold 2.8 of them).
SENTENCE_ROWS_PER_FACT = 3
# (fact type code, name), for the scan's one read of a bank's sentences.
_TYPE_CODES = " ".join(f"WHEN '{name}' THEN {code}" for code, name in enumerate(FACT_TYPES))


def _type_codes(codes: str | None) -> np.ndarray:
    """FACT_TYPES indexes from the digits the CASE of _TYPE_CODES (ELSE 9) gave each
    row; -1 for a type not in FACT_TYPES."""
    digits = np.frombuffer((codes or "").encode("ascii"), dtype=np.uint8).astype(np.int8)
    types = digits - ord("0")
    types[(types < 0) | (types >= len(FACT_TYPES))] = -1
    return types


class SentenceScan(BankScan):
    """One bank's sentence vectors (store schema 11) searched as BankScan searches facts:
    every sentence's sign bits in memory, read from one covering index (~60 bytes a
    sentence where its floats are 768), ranked by Hamming distance; the best few narrowed
    by the query's floats against their bits, and only those rows' floats read, by rowid,
    for the exact cosine. `ids` are the sentences' rowids (what floats are read by),
    `fact_ids` their facts. The scan lives until the file changes (VectorsPart drops it
    on this connection's writes), so it is never extended."""

    FLOATS_SQL = (
        "SELECT group_concat(a.rowid), CAST(group_concat(a.embedding, '') AS BLOB) "
        "FROM json_each(?) AS j JOIN sentence_vec AS a ON a.rowid = j.value "
        "WHERE length(a.embedding) = ?"
    )

    def __init__(self, conn: Any, bank_id: int, dim: int) -> None:
        self.dim = dim
        self.conn = conn
        nbytes = dim // 8
        self.word_type = np.uint64 if nbytes % 8 == 0 else np.uint8
        # One row for the bank: its sentences' rowids, facts, type codes and bits, each
        # list in the index's order (the aggregates read the same rows in the same order).
        count, rowids, fact_ids, codes, bits = conn.execute(
            "SELECT count(*), group_concat(rowid), group_concat(fact_id), "
            f"group_concat(CASE fact_type {_TYPE_CODES} ELSE 9 END, ''), "
            "CAST(group_concat(bits, '') AS BLOB) "
            "FROM sentence_vec INDEXED BY sentence_vec_scan WHERE bank_id = ?",
            (bank_id,),
        ).fetchone()
        self.ids = _id_array(rowids)
        self.fact_ids = _id_array(fact_ids)
        self.types = _type_codes(codes)
        packed = np.frombuffer(bits or b"", dtype=np.uint8)
        if (
            len(self.ids) != count
            or len(self.fact_ids) != count
            or len(self.types) != count
            or len(packed) != count * nbytes
            or (self.types < 0).any()
        ):
            raise _LayoutError("sentence rows without sign bits or of an unknown type")
        self.words = np.ascontiguousarray(packed.reshape(-1, nbytes).view(self.word_type).T)
        self._start_caches()

    def extend(self, rows: Sequence[tuple[int, str, bytes]]) -> None:
        raise NotImplementedError("a sentence scan is read again after a write")

    def rows_of(self, fact_ids: Sequence[int]) -> dict[int, int]:
        raise NotImplementedError("a sentence scan's rows are sentences, not facts")

    def rows_array(self, fact_ids: Sequence[int]) -> np.ndarray:
        raise NotImplementedError("a sentence scan's rows are sentences, not facts")

    def nearest(
        self, vec: np.ndarray, k: int, fact_types: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """The k facts whose nearest sentence is nearest to vec: (fact id, cosine). When the
        short list holds fewer than k facts (facts of many sentences each), it is widened,
        and at last every row is ranked, so a bank of k facts or more gives k."""
        if not len(self.ids) or k <= 0:
            return []
        query = np.asarray(vec, dtype=np.float32)
        wanted = None if fact_types is None or set(FACT_TYPES) <= set(fact_types) else fact_types
        pool = None if wanted is None else self.rows_of_types(wanted)
        if pool is not None and not len(pool):
            return []
        size = len(self.ids) if pool is None else len(pool)
        distances = self.hamming(self.query_words(sign_bits(query)))
        want, before = SENTENCE_ROWS_PER_FACT * k, 0
        while True:
            rows = _shortlist(self, distances, pool, want, query)
            if len(rows) <= before:  # the short list grows no more (shortlist_sizes' cap)
                rows = np.arange(size) if pool is None else pool
            found = self._best_facts(rows, query, k)
            if len(found) >= k or len(rows) >= size:
                return found
            want, before = 4 * want, len(rows)

    def _best_facts(self, rows: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The k facts of these rows whose best sentence is nearest the query."""
        cosines = _cosines(self.floats(rows, self.conn), query)
        order = np.argsort(-cosines, kind="stable")
        out: list[tuple[int, float]] = []
        seen: set[int] = set()
        for fact_id, cosine in zip(self.fact_ids[rows[order]].tolist(), cosines[order].tolist()):
            if fact_id not in seen:
                seen.add(fact_id)
                out.append((fact_id, cosine))
                if len(out) >= k:
                    break
        return out

    @property
    def nbytes(self) -> int:
        """Memory the scan holds (before any floats are read)."""
        return self.ids.nbytes + self.fact_ids.nbytes + self.types.nbytes + self.words.nbytes


class VectorsPart:
    """store.vectors: fact vectors (one vec0 table, partitioned by bank), the embedder each
    bank was made with, and nearest-neighbour searches, with each bank's scan cached on this
    connection."""

    def __init__(self, core: StoreCore, search: SearchPart) -> None:
        self.core = core
        self.conn = core.conn
        self.search = search
        # Per bank: its scan of the vectors and the data_version it was read at (_bank_scan).
        self._scans: dict[int, _CachedScan] = {}
        # Scans another connection of this process lent this one (search_with).
        self._adopted: dict[int, BankScan] = {}
        self._vector_bits: bool | None = None  # whether fact_vec has the sign bits
        self._scan_layout_ok: bool | None = None  # whether vec0 stores what BankScan reads
        # Per bank: its sentence vectors as one matrix, and the data_version it was read at
        # (_sentence_matrix); dropped when this connection writes any.
        self._sentences: dict[int, tuple[int, SentenceScan | SentenceMatrix]] = {}
        self._sentence_table = False  # known to exist (has_sentence_table)
        self._sentence_bits = False  # known to exist (has_sentence_bits)
        core.on_rollback(self.forget_scans)

    def vector_dim(self) -> int | None:
        value = self.core.get_meta("embedding_dim")
        return int(value) if value else None

    def has_vectors(self) -> bool:
        return self.vector_dim() is not None

    def store_embedder(self) -> str | None:
        """The embedder the vector table was made with, or last re-made with (`mem stats`);
        each bank's own is bank_embedder's."""
        return self.core.get_meta("embedder")

    def ensure_vectors(self, bank_id: int, name: str, fingerprint: str | None, dim: int) -> None:
        """Create the vector table on first use, and bind the bank to this embedder (or check
        that it is the one the bank was made with). Call inside atomic()."""
        have_dim = self.vector_dim()
        if have_dim is None:
            self.make_table(dim)
            self.core.set_meta("embedder", name)
        elif have_dim != dim:
            raise StoreError(
                f"{self.core.path} holds {have_dim}-dimensional vectors; {name} makes {dim}: "
                "use another store for it"
            )
        self.check_embedder(bank_id, name, fingerprint, record=True)

    def make_table(self, dim: int) -> None:
        """Create the vector table, for vectors of dim (there is none). Inside atomic()."""
        self.conn.execute(vector_table_sql("fact_vec", dim))
        self.core.set_meta("embedding_dim", str(dim))
        self._vector_bits = None

    def drop_table(self) -> None:
        """Drop the vector table and every vector in it. Inside atomic()."""
        self.conn.execute("DROP TABLE fact_vec")
        self.conn.execute("DELETE FROM sentence_vec")
        self.forget_scans()

    def check_embedder(
        self, bank_id: int, name: str, fingerprint: str | None, *, record: bool = False
    ) -> None:
        """Raise when the bank was embedded by another model. With record, a bank that has
        no fingerprint yet (new, or made before fingerprints) takes this one's."""
        have_name, have_fp = self.bank_embedder(bank_id)
        if have_fp is not None:
            if fingerprint is not None and have_fp != fingerprint:
                raise StoreError(
                    f"this bank was embedded with {have_name} ({have_fp[:12]}), not "
                    f"{name} ({fingerprint[:12]}): use {have_name} as the {{embedder}}, or "
                    "re-embed the bank (reembed)"
                )
            return
        if (
            have_name is not None
            and not same_model_name(have_name, name)
            and self.bank_has_vectors(bank_id)
        ):
            raise StoreError(
                f"this bank was embedded with {have_name}, not {name}: use {have_name} as the "
                "{embedder}, or re-embed the bank (reembed)"
            )
        if record:
            self.set_bank_embedder(bank_id, name, fingerprint)

    def bank_embedder(self, bank_id: int) -> tuple[str | None, str | None]:
        """(embedder name, fingerprint) recorded for the bank, (None, None) before its first
        vector."""
        row = self.conn.execute(
            "SELECT embedder, embedder_fingerprint FROM banks WHERE id = ?", (bank_id,)
        ).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def set_bank_embedder(self, bank_id: int, name: str, fingerprint: str | None) -> None:
        self.conn.execute(
            "UPDATE banks SET embedder = ?, embedder_fingerprint = ? WHERE id = ?",
            (name, fingerprint, bank_id),
        )

    def has_vector(self, fact_id: int) -> bool:
        """Whether the fact has a vector."""
        if self.core.get_meta("embedding_dim") is None:
            return False
        return (
            self.conn.execute("SELECT 1 FROM fact_vec WHERE fact_id = ?", (fact_id,)).fetchone()
            is not None
        )

    def bank_has_vectors(self, bank_id: int) -> bool:
        if not self.has_vectors():
            return False
        return (
            self.conn.execute(
                "SELECT 1 FROM facts WHERE bank_id = ? LIMIT 1", (bank_id,)
            ).fetchone()
            is not None
        )

    def _decode(self, blob: bytes) -> np.ndarray:
        """A stored float vector: half precision beside the bits, else single."""
        if self.has_vector_bits():
            return np.frombuffer(blob, dtype=HALF).astype(np.float32)
        return np.frombuffer(blob, dtype=np.float32)

    def has_vector_bits(self) -> bool:
        """True when fact_vec carries the sign-bit column (the prefilter)."""
        cached = self._vector_bits
        if cached is None:
            sql = self.conn.execute(
                "SELECT sql FROM sqlite_master WHERE name = 'fact_vec'"
            ).fetchone()
            cached = bool(sql and "embedding_bits" in sql[0])
            if sql is not None:  # the table only ever gains the column by a migration
                self._vector_bits = cached
        return cached

    def add_vector(self, fact_id: int, bank_id: int, fact_type: str, embedding: Any) -> None:
        vec = np.asarray(embedding, dtype=np.float32)
        if self.has_vector_bits():
            bits = sign_bits(vec)
            self.conn.execute(
                "INSERT INTO fact_vec(fact_id, bank_id, fact_type, embedding_bits, embedding) "
                "VALUES(?, ?, ?, vec_bit(?), ?)",
                (fact_id, bank_id, fact_type, bits, vec.astype(HALF).tobytes()),
            )
            cached = self._scans.get(bank_id)
            if cached is not None:
                cached.written.append((fact_id, fact_type, bits))
            return
        self.conn.execute(
            "INSERT INTO fact_vec(fact_id, bank_id, fact_type, embedding) VALUES(?, ?, ?, ?)",
            (fact_id, bank_id, fact_type, vec.tobytes()),
        )

    def add_sentence_vectors(
        self, fact_id: int, bank_id: int, fact_type: str, vectors: Any
    ) -> None:
        """Store the vectors of the fact's sentences (retain.sentence_texts), beside its own."""
        rows = np.asarray(vectors, dtype=np.float32).astype(HALF)
        if self.has_sentence_bits():
            bits = half_sign_bits(rows)
            self.conn.executemany(
                "INSERT INTO sentence_vec(fact_id, bank_id, fact_type, embedding, bits) "
                "VALUES(?, ?, ?, ?, ?)",
                [
                    (fact_id, bank_id, fact_type, row.tobytes(), row_bits.tobytes())
                    for row, row_bits in zip(rows, bits)
                ],
            )
        else:
            self.conn.executemany(
                "INSERT INTO sentence_vec(fact_id, bank_id, fact_type, embedding) "
                "VALUES(?, ?, ?, ?)",
                [(fact_id, bank_id, fact_type, row.tobytes()) for row in rows],
            )
        self._sentences.pop(bank_id, None)

    def sentence_vectors(self, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The sentence vectors of these facts, one row each, in the order stored (a fact
        without any is absent)."""
        if not self.has_sentence_table():
            return {}
        dim = self.vector_dim() or 0
        found: dict[int, list[bytes]] = {}
        for batch in batched(list(fact_ids)):
            for fid, blob in self.conn.execute(
                "SELECT fact_id, embedding FROM sentence_vec "
                f"WHERE fact_id IN ({marks(len(batch))}) ORDER BY rowid",
                batch,
            ):
                found.setdefault(fid, []).append(blob)
        return {
            fid: np.frombuffer(b"".join(blobs), dtype=HALF).astype(np.float32).reshape(-1, dim)
            for fid, blobs in found.items()
        }

    def delete_vectors(self, fact_ids: Sequence[int]) -> None:
        if not self.has_vectors():
            return
        self.forget_scans()
        for batch in batched(list(fact_ids)):
            self.conn.execute(f"DELETE FROM fact_vec WHERE fact_id IN ({marks(len(batch))})", batch)
            self.conn.execute(
                f"DELETE FROM sentence_vec WHERE fact_id IN ({marks(len(batch))})", batch
            )

    def move_vectors(self, fact_ids: Sequence[int], bank_id: int) -> None:
        """Give vectors another partition (vec0 cannot update a partition key in place)."""
        if not self.has_vectors():
            return
        self.forget_scans()
        for batch in batched(list(fact_ids)):
            m = marks(len(batch))
            rows = self.conn.execute(
                f"SELECT fact_id, fact_type, embedding FROM fact_vec WHERE fact_id IN ({m})",
                batch,
            ).fetchall()
            self.conn.execute(f"DELETE FROM fact_vec WHERE fact_id IN ({m})", batch)
            for fid, ftype, blob in rows:
                self.add_vector(fid, bank_id, ftype, self._decode(blob))
            self.conn.execute(
                f"UPDATE sentence_vec SET bank_id = ? WHERE fact_id IN ({m})", (bank_id, *batch)
            )

    def vectors_for(
        self, fact_ids: Sequence[int], bank_id: int | None = None
    ) -> dict[int, np.ndarray]:
        """Float vectors of these facts (of one bank, when given: read by offset, fast)."""
        out: dict[int, np.ndarray] = {}
        if not self.has_vectors():
            return out
        scan = self._bank_scan(bank_id) if bank_id is not None else None
        if scan is not None:
            rows = scan.rows_of(fact_ids)
            if rows:
                matrix = scan.floats(np.fromiter(rows.values(), dtype=np.int64), self.conn)
                out.update((f, v) for f, v in zip(rows, matrix) if v.any())
            return out
        for batch in batched(list(fact_ids)):
            for fid, blob in self.conn.execute(
                f"SELECT fact_id, embedding FROM fact_vec WHERE fact_id IN ({marks(len(batch))})",
                batch,
            ):
                out[fid] = self._decode(blob)
        return out

    def prepare_vector_search(self, bank_id: int, *, sentences: bool = False) -> BankScan | None:
        """Read the bank's scan now (searches read it on first use anyway), and with
        `sentences` its sentence search: a recall does it while its model loads (a new
        process's read of 200k sentences' bits, ~70 ms, was on the critical path). Returns
        the bank's scan, for search_with on another connection."""
        if not self.has_vectors():
            return None
        if sentences and self.has_sentence_table():
            self._sentence_matrix(bank_id)
        return self._bank_scan(bank_id)

    def search_with(self, bank_id: int, scan: BankScan | None) -> None:
        """Search the bank with a scan another connection of this process read (one recall
        hands its scan to the connection an arm runs on in a second thread: reading the
        bank's bits again costs ~25 ms at 100k facts); None hands it back. Floats are read
        on this connection. The scan is the lender's state of the file: the recall checks
        that no commit came between (pipeline.recall)."""
        if scan is None:
            self._adopted.pop(bank_id, None)
        else:
            self._adopted[bank_id] = scan

    def fact_vectors(self, bank_id: int, fact_ids: Sequence[int]) -> Any:
        """The stored vectors of these facts of the bank (a row of zeros for one that has
        none), read through the bank's scan, which keeps the ones a search just read; None
        when there are no vectors or the table is not laid out for the scan."""
        scan = self._bank_scan(bank_id) if self.has_vectors() else None
        if scan is None:
            return None
        ids = list(fact_ids)
        rows = scan.rows_of(ids)
        out = np.zeros((len(ids), scan.dim), dtype=np.float32)
        have = [i for i, f in enumerate(ids) if f in rows]
        if have:
            out[have] = scan.floats(np.array([rows[ids[i]] for i in have]), self.conn)
        return out

    def forget_scans(self) -> None:
        """Drop the cached bank scans: this connection deleted or moved vectors, dropped the
        table, or rolled back writes the scans were told about."""
        self._scans = {}
        self._sentences = {}

    def nearest_sentences(
        self, bank_id: int, vec: np.ndarray, k: int, fact_types: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """The k facts of the bank (of these fact types, when given) whose sentence vectors
        come nearest to vec, as (fact id, cosine of its nearest sentence), best first."""
        if k <= 0 or not self.has_vectors() or not self.has_sentence_table():
            return []
        return self._sentence_matrix(bank_id).nearest(vec, k, fact_types)

    def has_sentence_table(self) -> bool:
        """False in a store of schema 9 or older that no write has upgraded yet (a read
        does not upgrade a store)."""
        if not self._sentence_table:
            self._sentence_table = self.core.has_table("sentence_vec")
        return self._sentence_table

    def has_sentence_bits(self) -> bool:
        """True when sentence_vec holds sign bits and their index (schema 11; a file of
        schema 10 opened read-only does not)."""
        if not self._sentence_bits:
            self._sentence_bits = bool(
                self.conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?",
                    ("sentence_vec_scan",),
                ).fetchone()
            )
        return self._sentence_bits

    def _sentence_matrix(self, bank_id: int) -> SentenceScan | SentenceMatrix:
        """The bank's sentence search, read once and kept until a commit of another
        connection (data_version) or a write of this one: a SentenceScan, or where the
        rows have no sign bits (schema 10 read as it is, a dimension not a multiple of 8)
        every vector in one exact matrix. The scan finds what the matrix finds as the fact
        search does (bench/sentence_scan.py on real e5 vectors: the exact top 10 facts
        0.996 of the time at 20k sentences, 0.979 at 200k; the matrix cost 1.4 s of CPU
        and 309 MB to read at 200k, the scan 69 ms and 13 MB)."""
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        hit = self._sentences.get(bank_id)
        if hit is not None and hit[0] == version:
            return hit[1]
        dim = self.vector_dim() or 0
        search: SentenceScan | SentenceMatrix | None = None
        if dim % 8 == 0 and self.has_sentence_bits():
            try:
                search = SentenceScan(self.conn, bank_id, dim)
            except _LayoutError:
                search = None
        if search is None:
            # One row for the bank, as SentenceScan reads its bits.
            count, fact_ids, codes, joined = self.conn.execute(
                "SELECT count(*), group_concat(fact_id), "
                f"group_concat(CASE fact_type {_TYPE_CODES} ELSE 9 END, ''), "
                "CAST(group_concat(embedding, '') AS BLOB) FROM sentence_vec WHERE bank_id = ?",
                (bank_id,),
            ).fetchone()
            types = _type_codes(codes)
            halves = np.frombuffer(joined or b"", dtype=HALF)
            if len(halves) != count * dim or len(types) != count:
                raise StoreError("the sentence vectors are not all of the bank's dimension")
            if (types < 0).any():
                raise StoreError("a sentence vector of an unknown fact type")
            search = SentenceMatrix(
                _id_array(fact_ids),
                types,
                halves.astype(np.float32).reshape(count, dim),
            )
        self._sentences[bank_id] = (version, search)
        return search

    def _bank_scan(self, bank_id: int) -> BankScan | None:
        """The bank's vectors read from vec0's chunks, cached until another connection
        commits (data_version moves). This connection's own writes keep it: add_vector tells
        the cached scan of its new rows (added on the next read), and deletes, moves and
        rollbacks drop it (forget_scans), so a scan never misses or keeps a row.
        None when the table has no bits or is not laid out as BankScan reads it."""
        adopted = self._adopted
        if adopted and bank_id in adopted:
            return adopted[bank_id]
        if not self.has_vector_bits():
            return None
        if self._scan_layout_ok is None:
            row = self.conn.execute(
                "SELECT value FROM fact_vec_info WHERE key = 'CREATE_VERSION'"
            ).fetchone()
            self._scan_layout_ok = bool(row and row[0] == "v0.1.9")
        if not self._scan_layout_ok:
            return None
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        cache = self._scans
        hit = cache.get(bank_id)
        if hit is not None and hit.data_version == version:
            hit.scan.extend(hit.written)
            hit.written.clear()
            return hit.scan
        try:
            scan = BankScan(self.conn, bank_id, self.vector_dim() or 0)
        except _LayoutError:
            self._scan_layout_ok = False
            return None
        cache[bank_id] = _CachedScan(version, scan)
        return scan

    def nearest(
        self,
        bank_id: int,
        vec: np.ndarray,
        k: int,
        fact_types: Sequence[str] | None = None,
    ) -> list[tuple[int, float]]:
        """The k facts of the bank (of these fact types, when given) nearest to vec as
        (fact id, cosine), best first.

        A short list by the sign bits, ranked by exact cosine (BankScan, _shortlist); vec0's
        exact KNN when the bits cannot be read."""
        if not self.has_vectors() or k <= 0:
            return []
        query = np.asarray(vec, dtype=np.float32)
        wanted = None if fact_types is None or set(FACT_TYPES) <= set(fact_types) else fact_types
        scan = self._bank_scan(bank_id)
        if scan is None:
            if wanted is None:
                return self._vec0_nearest(bank_id, query, k, None)
            found = [p for t in wanted for p in self._vec0_nearest(bank_id, query, k, t)]
            return sorted(found, key=lambda pair: -pair[1])[:k]
        if not len(scan):
            return []
        distances = scan.hamming(scan.query_words(sign_bits(query)))
        pool = None if wanted is None else scan.rows_of_types(wanted)
        return _ranked_by_cosine(
            scan, _shortlist(scan, distances, pool, k, query), query, k, self.conn
        )

    def _vec0_nearest(
        self, bank_id: int, query: np.ndarray, k: int, fact_type: str | None
    ) -> list[tuple[int, float]]:
        """vec0's own KNN: over the sign bits then exact cosine, or over the floats."""
        type_cond = "" if fact_type is None else " AND fact_type = ?"
        type_arg = () if fact_type is None else (fact_type,)
        blob = query.tobytes()
        if not self.has_vector_bits():
            rows = self.conn.execute(
                "SELECT fact_id, distance FROM fact_vec WHERE embedding MATCH ? AND k = ? "
                f"AND bank_id = ?{type_cond}",
                (blob, min(k, VEC0_MAX_K), bank_id, *type_arg),
            )
            return [(fid, 1.0 - distance) for fid, distance in rows]
        rows = self.conn.execute(
            "SELECT fact_id, embedding FROM fact_vec WHERE embedding_bits MATCH vec_bit(?) "
            "AND k = ? "
            f"AND bank_id = ?{type_cond}",
            (sign_bits(query), prefilter_candidates(k), bank_id, *type_arg),
        ).fetchall()
        if not rows:
            return []
        matrix = np.stack([self._decode(r[1]) for r in rows])
        cosines = _cosines(matrix, query)
        order = np.argsort(-cosines, kind="stable")[:k]
        return [(rows[i][0], float(cosines[i])) for i in order]

    def nearest_among(
        self, bank_id: int, vec: np.ndarray, fact_ids: Sequence[int] | np.ndarray, k: int
    ) -> list[tuple[int, float]]:
        """The k of these facts (of one bank) nearest to vec, as (fact id, cosine), best
        first: by the sign bits then exact cosine, so a wide time window of many thousand
        facts costs a Hamming pass, not thousands of vector reads."""
        query = np.asarray(vec, dtype=np.float32)
        scan = self._bank_scan(bank_id)
        if scan is None:
            vectors = self.vectors_for(np.asarray(fact_ids, dtype=np.int64).tolist())
            scored = sorted(
                ((f, float(_cosines(v[None, :], query)[0])) for f, v in vectors.items()),
                key=lambda pair: -pair[1],
            )
            return scored[:k]
        # In row order, so ties (at the Hamming cut, and of cosine) do not depend on the
        # order the ids came in, and nearest_in_window's two ways agree.
        pool = np.sort(scan.rows_array(fact_ids))
        if not len(pool) or k <= 0:
            return []
        distances = scan.hamming(scan.query_words(sign_bits(query)))
        picked = _smallest(distances, pool, prefilter_candidates(k))
        return _ranked_by_cosine(scan, picked, query, k, self.conn)

    def _nearest_listed(
        self,
        bank_id: int,
        vec: np.ndarray,
        start: datetime,
        end: datetime,
        flt: FactFilterLike | None,
        k: int,
        said: tuple[datetime, datetime] | None,
    ) -> tuple[list[tuple[int, float]], dict[str, Any]]:
        """nearest_among of the window's facts that pass the filter. The window is listed
        without the filter (the time index answers alone) and the filter is checked on the
        rows the sign bits pick first, twice as many as needed: checking every listed
        fact's validity read a row each (3-5 ms of a time question at 100k facts). When
        fewer than needed of those pass (a filter the window's facts mostly fail), the
        window is listed with the filter, as before. Either way the picks are those of
        filtering first: the first of the passing rows in (distance, row) order."""
        ids = self.search.fact_ids_in_window(bank_id, start, end, None, said)
        scan = self._bank_scan(bank_id)
        want = prefilter_candidates(k)
        if scan is not None and len(ids) and filter_active(flt):
            query = np.asarray(vec, dtype=np.float32)
            pool = np.sort(scan.rows_array(ids))
            distances = scan.hamming(scan.query_words(sign_bits(query)))
            keep = _first_passing(
                scan,
                distances,
                pool,
                2 * want,
                lambda ids: self.search.filter_facts(ids, flt, bank_id),
            )
            if len(keep) >= want or 2 * want >= len(pool):
                picked = np.sort(keep[:want])
                return _ranked_by_cosine(scan, picked, query, k, self.conn), {"listed": len(ids)}
        if filter_active(flt):
            ids = self.search.fact_ids_in_window(bank_id, start, end, flt, said)
        return self.nearest_among(bank_id, vec, ids, k), {"listed": len(ids)}

    def nearest_in_window(
        self,
        bank_id: int,
        vec: np.ndarray,
        start: datetime,
        end: datetime,
        flt: FactFilterLike | None,
        k: int,
        *,
        probe: bool = True,
        said: tuple[datetime, datetime] | None = None,
    ) -> tuple[list[tuple[int, float]], dict[str, Any]]:
        """The k facts of the bank that overlap [start, end) and pass the filter nearest to
        vec, as (fact id, cosine) best first: the same k as nearest_among of
        fact_ids_in_window (`said` as there), and how they were found (for the trace).

        Listing a wide window's facts was most of the temporal arm: 60k of 100k facts in
        52-75 ms in a new process (the index read from disk). So the bank's rows are taken
        in Hamming order first, four times as many as the cosine ranking needs, and checked
        against the window and filter by id. When that finds too few, the share of the rows
        in the window says which way is cheaper: going on, or listing the window (a listed
        fact costs about a tenth of a checked one). probe=False always lists."""
        if k <= 0:
            return [], {}
        scan = self._bank_scan(bank_id)
        want = prefilter_candidates(k)
        if (
            probe
            and scan is not None
            and len(scan)
            and _worth_probing(self, bank_id, scan, want, start, end, said)
        ):
            query = np.asarray(vec, dtype=np.float32)
            distances = scan.hamming(scan.query_words(sign_bits(query)))
            total = len(scan)
            reach = min(total, 4 * want)
            while True:
                # The first `reach` rows in (distance, row) order that are in the window.
                hits = _first_passing(
                    scan,
                    distances,
                    None,
                    reach,
                    lambda ids: self.search.in_window_among(ids, start, end, flt, said),
                )
                figures = {"probed": reach, "in_window": len(hits)}
                if len(hits) >= want or reach >= total:
                    return _ranked_by_cosine(
                        scan, np.sort(hits[:want]), query, k, self.conn
                    ), figures
                share = len(hits) / reach
                needed = want / share if share else math.inf
                if needed > total * share / 10:
                    break  # listing is cheaper
                reach = min(total, math.ceil(2 * needed))
        return self._nearest_listed(bank_id, vec, start, end, flt, k, said)

    def nearest_earlier(
        self,
        bank_ids: Sequence[int],
        fact_ids: Sequence[int],
        vectors: np.ndarray,
        k: int,
        exclude: set[int],
        floor: float = -1.0,
    ) -> list[list[tuple[int, float]]]:
        """For each (fact id, vector): its k nearest facts with cosine >= floor among the
        banks' facts with a smaller id and not in exclude, as (fact id, cosine), best first.
        Retain's semantic links for one batch: each bank is read once, and the candidates'
        floats once."""
        if not len(fact_ids) or k <= 0:
            return [[] for _ in fact_ids]
        queries = np.asarray(vectors, dtype=np.float32).reshape(len(fact_ids), -1)
        scans = [self._bank_scan(b) for b in bank_ids]
        if any(scan is None for scan in scans):
            out = []
            for fid, vec in zip(fact_ids, queries):
                found = [
                    pair
                    for b in bank_ids
                    for pair in self.nearest(b, vec, k + 1 + min(len(exclude), k))
                    if pair[0] < fid and pair[0] not in exclude and pair[1] >= floor
                ]
                found.sort(key=lambda pair: -pair[1])
                out.append(found[:k])
            return out
        limit = prefilter_candidates(k)
        reach = hamming_reach(queries.shape[1], floor)
        excluded = np.fromiter(exclude, dtype=np.int64, count=len(exclude))
        # per query: (scan index, candidate rows) by Hamming distance
        picks: list[list[tuple[int, np.ndarray]]] = [[] for _ in fact_ids]
        for si, scan in enumerate(scans):
            if not len(scan):
                continue
            # Rows no query may link to get a distance past the largest real one. Only the
            # batch's own facts (the highest ids) are later than some query.
            blocked = scan.dim + 1
            shut = np.flatnonzero(np.isin(scan.ids, excluded)) if len(excluded) else None
            late = np.flatnonzero(scan.ids >= min(fact_ids))
            late_ids = scan.ids[late]
            for qi, (fid, vec) in enumerate(zip(fact_ids, queries)):
                distances = _blocked(
                    scan.hamming(scan.query_words(sign_bits(vec))).copy(),
                    shut,
                    late[late_ids >= fid],
                    blocked,
                )
                # Rows past the distance no pair at the floor reaches need no float read.
                near = np.flatnonzero(distances <= reach)
                if len(near) <= limit:
                    if len(near):
                        picks[qi].append((si, near))
                    continue
                picks[qi].append((si, near[_smallest(distances[near], None, limit)]))
        # Each scan's candidate floats read once for the whole batch.
        floats: list[tuple[np.ndarray, np.ndarray]] = []
        for si, scan in enumerate(scans):
            parts = [rows for pick in picks for s2, rows in pick if s2 == si]
            rows = sorted_unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
            floats.append((rows, scan.floats(rows, self.conn)))
        out = []
        for qi, query in enumerate(queries):
            found: list[tuple[int, float]] = []
            for si, rows in picks[qi]:
                all_rows, matrix = floats[si]
                cosines = _cosines(matrix[np.searchsorted(all_rows, rows)], query)
                keep = cosines >= floor
                found.extend(zip(scans[si].ids[rows[keep]].tolist(), cosines[keep].tolist()))
            found.sort(key=lambda pair: -pair[1])
            out.append(found[:k])
        return out

    def bank_vectors(self, bank_id: int) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, unit vectors) of one bank (re-embedding, export)."""
        dim = self.vector_dim() or 0
        if not dim:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        rows = self.conn.execute(
            "SELECT fact_id, embedding FROM fact_vec WHERE bank_id = ?", (bank_id,)
        ).fetchall()
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        vecs = (
            np.stack([self._decode(r[1]) for r in rows])
            if rows
            else np.zeros((0, dim), dtype=np.float32)
        )
        return ids, vecs
