"""Export a bank as JSONL and import it back, losslessly.

The file, one JSON object a line, in this order:
  {"kind": "header", "format": "mem-export", "format_version": 1, "schema": 3,
   "bank": {name, created_at, embedder, embedder_fingerprint},
   "vectors": {"dim", "encoding"} or null, "ids": {table: [min, max]},
   "fact_id_high": the highest fact id ever given (absent before), "counts": {...}}
  {"kind": "document", ...}*  {"kind": "chunk", ...}*  {"kind": "entity", ...}*
   (a document made from a file or another tool's history also has "source_hash", and one
   `mem sync` made "sync_root", so that a sync of that folder goes on in the store the bank
   is imported into)
  {"kind": "fact", ...}*      {"kind": "link", ...}*
   (with vectors, a fact has "vector", and one that says several things also
   "sentence_vectors": its sentences' vectors, one after the other, in the same encoding;
   a file of an older mem has none, and `mem reembed` computes them)
  {"kind": "end", "counts": {...}}
Every row keeps its id, so an import into a store that has none of those ids (a fresh
one) exports again byte for byte; where ids are taken, each table's ids are shifted past
the highest one in use, consistently. Rows come in id order and the header holds no clock
time, so exporting the same bank twice gives the same bytes.

An import is one transaction: a file cut short (no end record, or fewer rows than its
header counts), a line of another kind, another schema version, or vectors of another
embedder leave the store exactly as it was.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from memcli.display import has_visible_text
from memcli.labels import bank_name_problem
from memcli.lifecycle import LifecycleError, embedding_text
from memcli.retain import RetainError, check_json_value, section_of
from memcli.store import (
    FACT_TYPES,
    ID_LIMIT,
    INT64_MAX,
    LINK_KINDS,
    SCHEMA_VERSION,
    WriteRefused,
    check_bank_name,
    iso,
)
from memcli.store.exchange import SOURCE_COLUMNS
from memcli.store.protocol import StoreProtocol

FORMAT = "mem-export"
FORMAT_VERSION = 1
VECTOR_ENCODING = "base64 float32 little-endian"
KINDS = ("document", "chunk", "entity", "fact", "link")
_TABLE_OF = {"document": "documents", "chunk": "chunks", "entity": "entities", "fact": "facts"}
# Facts embedded per call when an import computes vectors.
EMBED_BATCH = 256


# One encoder for every line: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(obj: Any) -> str:
    return _ENCODER.encode(obj)


# -- export -------------------------------------------------------------------------------


def export_lines(
    store: StoreProtocol, bank: str, *, with_vectors: bool = False
) -> tuple[dict[str, Any], Iterator[str]]:
    """(header, lines): the bank as JSONL lines (without newlines), streamed from cursors
    inside one read transaction, so the file is one consistent state of the store. Consume
    the iterator fully (or close it) before writing to the store."""
    bank_id = store.banks.require_bank(bank)
    ctx = store.snapshot()
    ctx.__enter__()
    try:
        counts = store.exchange.export_counts(bank_id)
        dim = store.vectors.vector_dim() if with_vectors and counts["facts"] else None
        header = {
            "kind": "header",
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "schema": SCHEMA_VERSION,
            "bank": store.banks.bank_row(bank_id),
            "vectors": {"dim": dim, "encoding": VECTOR_ENCODING} if dim else None,
            "ids": store.exchange.bank_id_ranges(bank_id),
            # The highest fact id the store ever gave: an import keeps its new store from
            # giving a forgotten fact's id to another memory.
            "fact_id_high": store.exchange.max_id("facts"),
            "counts": counts,
        }
    except BaseException:
        ctx.__exit__(None, None, None)
        raise

    def lines() -> Iterator[str]:
        try:
            yield dumps(header)
            for kind in ("document", "chunk", "entity"):
                for rec in store.exchange.export_rows(bank_id, _TABLE_OF[kind]):
                    yield dumps({"kind": kind, **rec})
            for rec in store.exchange.export_facts(bank_id, bool(dim)):
                if dim:
                    blob = rec.pop("vector")
                    rec["vector"] = base64.b64encode(blob).decode("ascii") if blob else None
                    sentences = rec.pop("sentence_vectors", None)
                    if sentences:  # only a fact that has them (retain.sentence_texts)
                        rec["sentence_vectors"] = base64.b64encode(sentences).decode("ascii")
                yield dumps({"kind": "fact", **rec})
            for a, b, link_kind, weight in store.exchange.export_links(bank_id):
                yield dumps(
                    {"kind": "link", "from": a, "to": b, "link": link_kind, "weight": weight}
                )
            yield dumps({"kind": "end", "counts": counts})
        finally:
            ctx.__exit__(None, None, None)

    return header, lines()


# -- import -------------------------------------------------------------------------------


@dataclass
class ImportReport:
    bank: str
    counts: dict[str, int]
    renumbered: list[str]  # tables whose ids were shifted (taken in this store)
    embedded: int  # facts whose vectors were computed (the file had none, or --reembed)
    seconds: float = 0.0


class _Line:
    """Reads the file's lines with their numbers, JSON-decoded, one at a time."""

    def __init__(self, lines: Iterable[str], name: str, number: int = 0):
        self.name = name
        self._it = iter(lines)
        self.number = number  # of the last line read

    def next(self) -> dict[str, Any] | None:
        for raw in self._it:
            self.number += 1
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise self.error(
                    f"is not JSON ({exc.msg}): a half-written export? nothing imported"
                ) from None
            if not isinstance(obj, dict):
                raise self.error("is not a JSON object")
            return obj
        return None

    def error(self, message: str) -> LifecycleError:
        return LifecycleError(f"{self.name} line {self.number} {message}")

    def rest(self) -> Iterator[str]:
        """The lines not read yet."""
        return self._it


def utf8_lines(binary: Iterable[bytes], name: str) -> Iterator[str]:
    """The lines of a binary stream (read at b"\\n") as text, split where text mode splits
    them (\\n, \\r\\n, a lone \\r) and nowhere else (U+2028 may stand in a JSON string). A
    byte that is not UTF-8 is named at its line and column: text mode's error offset counts
    from the start of the block it was decoding, not of the file."""
    number = 0
    for raw in binary:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            head = raw[: exc.start]
            line = number + 1 + head.count(b"\r") - head.count(b"\r\n")
            column = exc.start - max(head.rfind(b"\r"), head.rfind(b"\n"))
            raise LifecycleError(
                f"{name} line {line} is not UTF-8 text (bad byte at column {column}); "
                "nothing imported"
            ) from None
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        while text:
            cut = text.find("\n") + 1 or len(text)
            number += 1
            yield text[:cut]
            text = text[cut:]


def _check_header(h: dict[str, Any] | None, src: _Line) -> dict[str, Any]:
    if h is None:
        raise LifecycleError(f"{src.name} is empty: not a mem export")
    if h.get("kind") != "header" or h.get("format") != FORMAT:
        hint = ""
        if "text" in h:
            hint = " (it looks like retain input: retain it as JSONL instead)"
        elif "results" in h or "query" in h:
            hint = " (it looks like recall output)"
        raise src.error(f"is not a mem export header{hint}")
    if h.get("format_version") != FORMAT_VERSION:
        raise src.error(
            f"is export format {h.get('format_version')!r}; this mem reads format {FORMAT_VERSION}"
        )
    if h.get("schema") != SCHEMA_VERSION:
        raise LifecycleError(
            f"{src.name} was exported from a store of schema {h.get('schema')!r}; this mem "
            f"imports schema {SCHEMA_VERSION}: export it again with a mem of schema "
            f"{SCHEMA_VERSION} (opening the old store with it upgrades it)"
        )
    for key, kind in (("bank", dict), ("ids", dict), ("counts", dict)):
        if not isinstance(h.get(key), kind):
            raise src.error(f"has no {key!r} object: not a mem export header")
    if not isinstance(h["bank"].get("name"), str) or not isinstance(
        h["bank"].get("created_at"), str
    ):
        raise src.error("names no bank")
    if not is_stored_time(h["bank"]["created_at"]):
        raise src.error(f"has a bad bank 'created_at': {h['bank']['created_at']!r:.40}")
    for key, count in h["counts"].items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise src.error(f"has a bad count for {key!r}: {count!r:.40} (not a whole number)")
        if count > ID_LIMIT:
            raise src.error(f"has a count for {key!r} too large for a store: {count}")
    for table, span in h["ids"].items():
        if table not in _TABLE_OF.values():
            raise src.error(f"header: unknown table {table!r}")
        if span is not None and (
            not isinstance(span, list)
            or len(span) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x for x in span)
            or span[0] > span[1]
        ):
            raise src.error(f"has a bad id range for {table!r}: {span!r:.40}")
        if span is not None and span[1] > ID_LIMIT:
            raise src.error(f"has ids too large for a store in {table!r} (past {ID_LIMIT})")
    high = h.get("fact_id_high")  # absent in the files of older versions
    if high is not None and (isinstance(high, bool) or not isinstance(high, int) or high < 0):
        raise src.error(f"has a bad 'fact_id_high': {high!r:.40}")
    if high is not None and high > ID_LIMIT:
        raise src.error(f"has a 'fact_id_high' too large for a store (past {ID_LIMIT})")
    v = h.get("vectors")
    if v is not None and (
        not isinstance(v, dict)
        or not isinstance(v.get("dim"), int)
        or v["dim"] <= 0
        or v.get("encoding") != VECTOR_ENCODING
    ):
        raise src.error("has a vectors entry this mem cannot read")
    return h


_REQUIRED: dict[str, dict[str, tuple[type, ...]]] = {
    "document": {"id": (int,), "external_id": (str,), "created_at": (str,)},
    "chunk": {"id": (int,), "document_id": (int, type(None)), "source_id": (str, type(None)),
              "text": (str,)},
    "entity": {"id": (int,), "name": (str,), "aliases": (list,), "first_seen": (str, type(None)),
               "last_seen": (str, type(None)), "mention_count": (int,), "keys": (list,)},
    "fact": {"id": (int,), "text": (str,), "context": (str, type(None)), "fact_type": (str,),
             "mentioned_at": (str,), "occurred_start": (str, type(None)),
             "occurred_end": (str, type(None)), "event_time": (str,), "tags": (list,),
             "metadata": (dict,), "proof_count": (int,), "source_id": (str, type(None)),
             "document_id": (int, type(None)), "chunk_id": (int, type(None)),
             "content_hash": (str,), "created_at": (str,), "valid_from": (str, type(None)),
             "invalid_at": (str, type(None)), "superseded_by": (int, type(None)),
             "entities": (list,), "fts_entities": (str, type(None)),
             "fts_lead_in": (str, type(None))},
    "link": {"from": (int,), "to": (int,), "link": (str,), "weight": (int, float)},
}  # fmt: skip


# Every time in the file is in the store's form: naive UTC to the second.
_TIME_KEYS = {
    "document": ("created_at",),
    "entity": ("first_seen", "last_seen"),
    "fact": ("mentioned_at", "occurred_start", "occurred_end", "event_time", "created_at",
             "valid_from", "invalid_at"),
}  # fmt: skip
_STRING_LISTS = {"entity": ("aliases", "keys"), "fact": ("tags",)}
# Text that must show something (what retain refuses when it is empty or only control chars).
_VISIBLE = {"chunk": ("text",), "entity": ("name",), "fact": ("text",)}
_OPTIONAL = {"document": SOURCE_COLUMNS, "fact": ("vector", "sentence_vectors")}


def is_stored_time(value: str) -> bool:
    """True for a time in the store's form (what `iso` writes): naive UTC, to the second."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return False
    return when.tzinfo is None and iso(when) == value


def _check_record(rec: dict[str, Any], kind: str, src: _Line) -> None:
    """Every key and value of one record, before it is stored: a file that passes stores
    only rows that retain could have written (the rest of mem reads them without checks)."""
    required = _REQUIRED[kind]
    for key, types in required.items():
        if key not in rec:
            raise src.error(f"({kind}) has no {key!r}")
        value = rec[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise src.error(f"({kind}) has a bad {key!r}: {value!r:.40}")
    for key in rec:
        if key != "kind" and key not in required and key not in _OPTIONAL.get(kind, ()):
            raise src.error(f"({kind}) has an unknown key {key!r}: not part of a mem export")

    def bad(key: str, why: str) -> LifecycleError:
        return src.error(f"({kind}) has a bad {key!r}: {why}")

    for key, value in rec.items():
        try:  # strings (a lone surrogate, a NUL) and numbers (NaN, Infinity), nested too
            check_json_value(value, repr(key))
        except RetainError as exc:
            raise src.error(f"({kind}) {exc}") from None
        if isinstance(value, int) and not isinstance(value, bool):
            if not (1 if key == "id" else 0) <= value <= INT64_MAX:
                raise bad(key, f"{value} is out of range")
    for key in _TIME_KEYS.get(kind, ()):
        if rec[key] is not None and not is_stored_time(rec[key]):
            raise bad(key, f"{rec[key]!r:.40} is not a UTC time like 2024-03-02T10:00:00")
    for key in _STRING_LISTS.get(kind, ()):
        if not all(isinstance(x, str) for x in rec[key]):
            raise bad(key, "not a list of strings")
    for key in _VISIBLE.get(kind, ()):
        if not has_visible_text(rec[key]):
            raise bad(key, "empty or only control characters")
    if kind == "document":
        if not rec["external_id"].strip():  # as retain checks it
            raise bad("external_id", "empty")
        for key in SOURCE_COLUMNS:
            value = rec.get(key)
            if key in rec and (not isinstance(value, str) or not value.strip()):
                raise bad(key, "not a non-empty string")
        # A sync names its folder by its absolute path; another never matches one.
        if "sync_root" in rec and not os.path.isabs(rec["sync_root"]):
            raise bad("sync_root", f"{rec['sync_root']!r:.40} is not an absolute path")
    if kind == "fact":
        if rec["fact_type"] not in FACT_TYPES:
            raise bad("fact_type", f"{rec['fact_type']!r:.40} (mem knows {', '.join(FACT_TYPES)})")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in rec["entities"]):
            raise bad("entities", "not a list of entity ids")
        start, end = rec["occurred_start"], rec["occurred_end"]
        if end is not None and (start is None or end < start):
            raise bad("occurred_end", "ends before the period starts")
    elif kind == "link" and rec["link"] not in LINK_KINDS:
        raise bad("link", f"{rec['link']!r:.40} (mem knows {', '.join(LINK_KINDS)})")


# The id columns of each record and the table they number (or point into).
_ID_FIELDS = {
    "document": {"id": "documents"},
    "chunk": {"id": "chunks", "document_id": "documents"},
    "entity": {"id": "entities"},
    "fact": {"id": "facts", "document_id": "documents", "chunk_id": "chunks",
             "superseded_by": "facts"},
    "link": {"from": "facts", "to": "facts"},
}  # fmt: skip


def _check_ids(rec: dict[str, Any], kind: str, spans: dict[str, Any], src: _Line) -> None:
    """Every id, and every id a record points to, lies in the range the header gives for
    its table: anything else is a damaged file (and, shifted past the ids in use, could
    overflow SQLite's INTEGER)."""
    for key, table in _ID_FIELDS[kind].items():
        value = rec[key]
        span = spans.get(table)
        if value is not None and (span is None or not span[0] <= value <= span[1]):
            raise src.error(
                f"({kind}) has a bad {key!r}: {value} is outside the header's ids for {table}"
            )


def _check_bank_is_new(store: StoreProtocol, target: str) -> None:
    if store.banks.bank_id(target) is not None:
        raise LifecycleError(
            f"bank {target!r} already exists in {store.path}: import into a new bank "
            f"({{into}}), or delete that bank first"
        )


def _records(src: _Line, header: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The records after the header as (kind, record), each checked before it is yielded:
    its kind and order, every field, every id against the header's ranges, an id given
    twice, a fact's entities among the entity records before it; last ("end", record), or
    nothing when the file ends without one. All of the file's checks that need no store
    (an id given twice was found by SQLite only when written, after the embedding)."""
    stage = 0
    seen: dict[str, set[int]] = {kind: set() for kind in KINDS if kind != "link"}
    while True:
        rec = src.next()
        if rec is None:
            return
        kind = rec.get("kind")
        if kind == "end":
            if src.next() is not None:
                raise src.error("comes after the end record")
            yield kind, rec
            return
        if kind not in KINDS:
            raise src.error(f"is a record of unknown kind {kind!r}: not part of a mem export")
        if KINDS.index(kind) < stage:
            raise src.error(f"({kind}) comes after the {KINDS[stage]} records")
        stage = KINDS.index(kind)
        _check_record(rec, kind, src)
        _check_ids(rec, kind, header["ids"], src)
        ids = seen.get(kind)
        if ids is not None:
            if rec["id"] in ids:
                raise src.error(f"({kind}) has id {rec['id']}, as a {kind} record before it")
            ids.add(rec["id"])
        if kind == "fact":
            missing = [x for x in rec["entities"] if x not in seen["entity"]]
            if missing:
                raise src.error(
                    f"(fact) has a bad 'entities': entity {missing[0]} is not among the "
                    "entity records before it"
                )
        yield kind, rec


def _embed_ahead(
    src: _Line,
    header: dict[str, Any],
    load_model: Callable[[], Any],
    vectors: IO[bytes],
    progress: Callable[[int], None] | None,
) -> Any:
    """Embed the file's facts in file order, their vectors (float32) written to `vectors`
    one after the other. Returns the model, or None when the file has no facts. Runs before
    the import's transaction: embedding is most of an import (~30 facts a second), and
    writers beside it (an agent's retain) would wait behind the write lock and time out."""
    import numpy as np

    model = None
    spellings: dict[int, list[str]] = {}
    texts: list[str] = []

    def flush() -> None:
        nonlocal model
        if not texts:
            return
        if model is None:
            model = load_model()
        found = np.asarray(model.embed(texts), dtype="<f4")
        try:
            vectors.write(found.tobytes())
            vectors.flush()  # here, where a full disk is reported as one
        except OSError as exc:
            raise _temporary_failure(exc, "keep the computed vectors in") from None
        if progress:
            progress(len(texts))
        texts.clear()

    for kind, rec in _records(src, header):
        if kind == "entity":
            spellings[rec["id"]] = [rec["name"], *rec["aliases"]]
        elif kind == "fact":
            texts.append(
                embedding_text(
                    rec["text"],
                    rec["context"],
                    rec["occurred_start"],
                    rec["occurred_end"],
                    rec["fts_lead_in"],
                    section_of(rec["metadata"]),
                    [spellings[eid] for eid in rec["entities"]],
                )
            )
            texts.extend(_sentence_texts(rec))
            if len(texts) >= EMBED_BATCH:
                flush()
    flush()
    return model


def _spooled(lines: Iterable[str], name: str) -> IO[str]:
    """The rest of the input in an unnamed temporary file, to be read twice (stdin can be
    read once)."""
    # Lines end in "\n" only, read back as written (a lone surrogate too: the file's check
    # names it at its line).
    spool = _temporary_file("w+", encoding="utf-8", errors="surrogatepass", newline="\n")
    try:
        for line in lines:
            spool.write(line if line.endswith("\n") else line + "\n")
        spool.flush()
        spool.seek(0)
    except OSError as exc:
        _close_quietly(spool)
        raise _temporary_failure(exc, f"copy {name} to") from None
    except BaseException:
        _close_quietly(spool)
        raise
    return spool


def _temporary_file(*args: Any, **kwargs: Any) -> Any:
    """tempfile.TemporaryFile, its failure (no usable temporary folder) one line."""
    try:
        return tempfile.TemporaryFile(*args, **kwargs)
    except OSError as exc:
        raise _temporary_failure(exc, "make") from None


def _temporary_failure(exc: OSError, what: str) -> LifecycleError:
    return LifecycleError(
        f"cannot {what} a temporary file ({exc.strerror or exc}; TMPDIR chooses its folder); "
        "nothing imported"
    )


def _close_quietly(f: IO[Any]) -> None:
    """Close a temporary file whose last write failed: close() flushes the stuck buffer
    again, and its error would hide the one being reported."""
    try:
        f.close()
    except OSError:
        pass


def import_lines(
    store: StoreProtocol,
    lines: Iterable[str],
    *,
    name: str,
    bank: str | None,
    embedder: Callable[[], Any],
    reembed: bool = False,
    progress: Callable[[int], None] | None = None,
    on_header: Callable[[dict[str, Any]], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> ImportReport:
    """Import an export file into a new bank (default: the bank named in the file), in one
    transaction. `embedder` is called (once) only when vectors must be computed or checked.

    A file without vectors (or --reembed) is read twice: its facts are embedded first,
    outside the transaction, then everything is written under the write lock. `on_stage`
    is told "embedding" and "importing" as each pass starts (a file with vectors has only
    the second); `progress` counts facts in each."""
    started = time.perf_counter()
    src = _Line(lines, name)
    header = _check_header(src.next(), src)
    if on_header:
        on_header(header)
    target = bank or header["bank"]["name"]
    if bank is None and bank_name_problem(target):
        # A name an older mem took ("work "): the file is fine, the name is not any more.
        raise LifecycleError(
            f"{name}: the bank name in its header: {bank_name_problem(target)}; import it "
            "under another name ({into})"
        )
    check_bank_name(target)
    _check_bank_is_new(store, target)
    file_vectors = header.get("vectors")
    use_file_vectors = file_vectors is not None and not reembed
    with ExitStack() as temporary:
        if use_file_vectors:
            model = embedder()
            fb = header["bank"]
            have_fp = fb.get("embedder_fingerprint")
            fp = getattr(model, "fingerprint", None)
            same = have_fp == fp if (have_fp and fp) else fb.get("embedder") == model.name
            if not same or file_vectors["dim"] != model.dim:
                raise LifecycleError(
                    f"{name} holds vectors of {fb.get('embedder')} ({(have_fp or '?')[:12]}), "
                    f"not of {model.name} ({(fp or '?')[:12]}), the embedder in use: add "
                    f"{{reembed}} to embed the facts again with {model.name}, or use that "
                    "model as the {embedder}"
                )
            vec_name, vec_fp, dim = fb.get("embedder"), have_fp, file_vectors["dim"]
            computed = None
        else:
            spool = _spooled(src.rest(), name)
            temporary.callback(_close_quietly, spool)
            computed = _temporary_file()
            temporary.callback(_close_quietly, computed)
            if on_stage:
                on_stage("embedding")
            model = _embed_ahead(
                _Line(spool, name, src.number), header, embedder, computed, progress
            )
            computed.seek(0)
            spool.seek(0)
            src = _Line(spool, name, src.number)
            vec_name = model.name if model is not None else None
            vec_fp = getattr(model, "fingerprint", None)
            dim = model.dim if model is not None else 0
        if on_stage:
            on_stage("importing")
        return _write(
            store, src, header, target, vec_name, vec_fp, dim, computed, progress, started
        )


def _write(
    store: StoreProtocol,
    src: _Line,
    header: dict[str, Any],
    target: str,
    vec_name: str | None,
    vec_fp: str | None,
    dim: int,
    computed: IO[bytes] | None,
    progress: Callable[[int], None] | None,
    started: float,
) -> ImportReport:
    """The import's one transaction: the bank and every record, each fact with its vector
    from the file or, read in file order, from `computed`."""
    counts = dict.fromkeys(KINDS, 0)
    renumbered: list[str] = []
    with store.atomic():
        store.exchange.defer_foreign_keys()
        # Again under the write lock: another import may have made it since (it failed
        # with "UNIQUE constraint failed: banks.name").
        _check_bank_is_new(store, target)
        bank_id = store.exchange.create_bank_row(target, header["bank"]["created_at"])
        shift: dict[str, int] = {}
        for table, span in header["ids"].items():
            if span is None:
                shift[table] = 0
                continue
            if store.exchange.ids_taken(table, span[0], span[1]):
                shift[table] = store.exchange.max_id(table) - span[0] + 1
                renumbered.append(table)
                if span[1] + shift[table] > ID_LIMIT:
                    raise src.error(
                        f"has ids too large for this store once moved past its own {table} "
                        f"ids (past {ID_LIMIT}); nothing imported"
                    )
            else:
                shift[table] = 0
        d, c, e, f = (shift.get(t, 0) for t in ("documents", "chunks", "entities", "facts"))

        def opt(value: int | None, by: int) -> int | None:
            return None if value is None else value + by

        link_rows: list[tuple[int, int, str, float]] = []
        vectors_ready = False
        end = None
        try:
            with store.exchange.refused_writes():
                for kind, rec in _records(src, header):
                    if kind == "end":
                        end = rec
                        break
                    if kind == "document":
                        store.exchange.import_document(
                            bank_id,
                            rec["id"] + d,
                            rec["external_id"],
                            rec["created_at"],
                            rec.get("source_hash"),
                            rec.get("sync_root"),
                        )
                    elif kind == "chunk":
                        store.exchange.import_chunk(
                            bank_id,
                            rec["id"] + c,
                            opt(rec["document_id"], d),
                            rec["source_id"],
                            rec["text"],
                        )
                    elif kind == "entity":
                        rec["id"] += e
                        store.exchange.import_entity(bank_id, rec["id"], rec)
                    elif kind == "fact":
                        rec["id"] += f
                        rec["document_id"] = opt(rec["document_id"], d)
                        rec["chunk_id"] = opt(rec["chunk_id"], c)
                        rec["superseded_by"] = opt(rec["superseded_by"], f)
                        if computed is None:
                            blob = _vector(rec, dim, src)
                        else:
                            # The fact's vector, then its sentences' (as _embed_ahead wrote).
                            size = dim * 4 * (1 + len(_sentence_texts(rec)))
                            blob = computed.read(size)
                            if len(blob) != size:  # the spool read back is not what was written
                                raise src.error("(fact) has no computed vector; nothing imported")
                        if not vectors_ready:
                            store.vectors.ensure_vectors(bank_id, vec_name, vec_fp, dim)
                            vectors_ready = True
                        _insert_fact(store, bank_id, rec, [x + e for x in rec["entities"]], blob)
                        if progress:
                            progress(1)
                    else:
                        link_rows.append(
                            (rec["from"] + f, rec["to"] + f, rec["link"], rec["weight"])
                        )
                        if len(link_rows) >= 1000:
                            store.exchange.import_links(link_rows)
                            link_rows.clear()
                    counts[kind] += 1
                store.exchange.import_links(link_rows)
                if header.get("fact_id_high") is not None and f == 0:
                    # The file's ids kept as they were: those it gave and forgot stay given. (A
                    # bank renumbered past the store's ids has new ids; its mark adds nothing,
                    # and shifted it doubled the store's ids on every import.)
                    store.exchange.keep_fact_ids_past(header["fact_id_high"])
                made_with = header["bank"].get("embedder")
                if not vectors_ready and isinstance(made_with, str) and made_with:
                    # A bank without facts (all forgotten) keeps the model it was made with: its
                    # next retain embeds with that model, and its export reads as the file did.
                    fingerprint = header["bank"].get("embedder_fingerprint")
                    store.vectors.set_bank_embedder(
                        bank_id, made_with, fingerprint if isinstance(fingerprint, str) else None
                    )
        except WriteRefused as exc:
            raise src.error(f"cannot be stored: {exc}; nothing imported") from None
        if end is None:
            raise LifecycleError(
                f"{src.name} ends at line {src.number} without its end record: a half-written "
                "export? nothing imported"
            )
        expected = header["counts"]
        got = {_TABLE_OF.get(k, k + "s"): counts[k] for k in KINDS}
        if any(expected.get(k) != v for k, v in got.items()):
            raise LifecycleError(
                f"{src.name} holds {_counts_text(got)} but its header promised "
                f"{_counts_text(expected)}: the file is damaged; nothing imported"
            )
        if end.get("counts") != expected:
            raise LifecycleError(
                f"{src.name}'s end record counts {_counts_text(end.get('counts') or {})} but "
                f"its header and records {_counts_text(expected)}: the file is damaged; "
                "nothing imported"
            )
        dangling = store.exchange.dangling_references()
        if dangling:
            raise LifecycleError(
                f"{src.name} refers to {dangling} rows it does not hold (ids of another bank?); "
                "nothing imported"
            )
        loops = store.exchange.correction_loops(bank_id)
        if loops:
            raise LifecycleError(
                f"{src.name} has {loops} facts whose corrections lead back to themselves (no "
                "version is current): the file is damaged; nothing imported"
            )
    embedded = counts["fact"] if computed is not None else 0
    report_counts = {**got, "embedded": embedded}
    return ImportReport(target, report_counts, renumbered, embedded, time.perf_counter() - started)


def _sentence_texts(rec: dict[str, Any]) -> list[str]:
    """The texts of the fact's sentence vectors, as retain embeds them."""
    from memcli.retain import sentence_texts

    return sentence_texts(rec["text"], rec["context"], section_of(rec["metadata"]))


def _vector(rec: dict[str, Any], dim: int, src: _Line) -> bytes:
    """The fact's vector from the file, then its sentence vectors (a file of an older mem
    has none: `mem reembed` computes them)."""
    value = rec.get("vector")
    if not isinstance(value, str):
        raise src.error("(fact) has no vector although the header says the file has them")
    blob = _floats(value, "vector", src)
    if len(blob) != dim * 4:
        raise src.error(f"(fact) has a vector of {len(blob) // 4} floats, not {dim}")
    sentences = rec.get("sentence_vectors")
    if sentences is None:
        return blob
    if not isinstance(sentences, str):
        raise src.error(f"(fact) has a bad 'sentence_vectors': {sentences!r:.40}")
    extra = _floats(sentences, "sentence_vectors", src)
    if not extra or len(extra) % (dim * 4):
        raise src.error(
            f"(fact) has 'sentence_vectors' of {len(extra) // 4} floats, not a multiple of {dim}"
        )
    return blob + extra


def _floats(value: str, key: str, src: _Line) -> bytes:
    """A base64 run of float32 vectors, each with a direction."""
    try:
        blob = base64.b64decode(value, validate=True)
    except ValueError:
        raise src.error(f"(fact) has a {key!r} that is not base64") from None
    import numpy as np

    values = np.frombuffer(blob[: len(blob) // 4 * 4], dtype="<f4")
    # No direction, no cosine: such a fact was in no semantic search, and doctor saw nothing.
    if not np.isfinite(values).all():
        raise src.error(f"(fact) has a {key!r} with values that are not numbers (NaN or inf)")
    if len(values) and not values.any():
        raise src.error(f"(fact) has a {key!r} of zeros")
    return blob


def _insert_fact(
    store: StoreProtocol, bank_id: int, rec: dict[str, Any], entity_ids: list[int], blob: bytes
) -> None:
    from memcli.blocks import tail_tokens
    from memcli.store import FACT_TYPES

    if rec["fact_type"] not in FACT_TYPES:
        raise LifecycleError(f"fact {rec['id']}: unknown type {rec['fact_type']!r}")
    store.exchange.import_fact(
        bank_id,
        rec,
        entity_ids,
        blob,
        tail_tokens(rec["context"], rec["text"]),
    )


def _counts_text(counts: dict[str, Any]) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items())
