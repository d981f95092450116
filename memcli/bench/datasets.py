"""Readers that turn benchmark files into one uniform in-memory form for ``mem bench``.

Every benchmark is reduced to :class:`BenchCase` objects. One case is one fresh store: the
runner retains ``case.items`` into an empty store, then asks ``case.questions`` against it. The
readers do no scoring and make no policy decisions beyond what each benchmark's own protocol
prescribes, so the runner can treat LoCoMo, LongMemEval and user data identically.

Timestamps are naive datetimes meant as UTC, because the store compares times without zones and
the public benchmarks give local wall-clock times with no zone at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

__all__ = [
    "BenchCase",
    "BenchItem",
    "BenchQuestion",
    "FORMATS",
    "iter_dataset",
    "iter_lme",
    "iter_longmemeval",
    "normalise_evidence_ids",
    "parse_timestamp",
    "read_dataset",
    "read_jsonl",
    "read_locomo",
    "read_longmemeval",
]

FORMATS = ("locomo", "longmemeval", "lme", "jsonl")

LOCOMO_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
LONGMEMEVAL_DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"

_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")
_LOCOMO_SESSION_KEY = re.compile(r"session_(\d+)")


@dataclass
class BenchItem:
    """One thing to retain: a dialog turn (LoCoMo, LongMemEval) or a user-supplied item.

    ``timestamp`` is naive UTC. ``context`` is a short label retained with the text (the speaker
    for LoCoMo); ``session_id`` groups items for session-level scoring.
    """

    id: str
    text: str
    timestamp: datetime
    context: str | None = None
    session_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Retained as the item's document_id (lme: its session), so a session is one document.
    document_id: str | None = None


@dataclass
class BenchQuestion:
    """One recall query with its gold answers, expressed as item ids of the same case.

    ``now`` is the moment the question is asked (for relative dates such as "last week"); None
    means the benchmark gives none. ``gold_ids`` may be empty (e.g. all evidence ids were
    malformed, or the gold lives in turns that are not indexed): the runner must skip such a
    question in the scores and count it. ``metadata`` carries reader-specific extras (raw and
    dropped evidence ids, adversarial answers) that never affect scoring.

    ``unanswerable``: the data says nothing answers it (LoCoMo category 5, LongMemEval's
    ``_abs`` questions). It is never in the recall scores; the runner may still ask it, to
    measure whether recall knows that nothing is relevant (the relevance floor).
    """

    id: str
    query: str
    now: datetime | None = None
    category: str = "default"
    gold_ids: set[str] = field(default_factory=set)
    gold_sessions: set[str] = field(default_factory=set)
    checklist: list[str] = field(default_factory=list)
    distractor_ids: set[str] = field(default_factory=set)
    answer: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    unanswerable: bool = False


@dataclass
class BenchCase:
    """The unit of isolation: ``items`` go into one fresh store, then ``questions`` are asked."""

    id: str
    items: list[BenchItem]
    questions: list[BenchQuestion]


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def parse_timestamp(value: str) -> datetime:
    """Parse an ISO 8601 string into naive UTC.

    A trailing ``Z`` is accepted (Python 3.10's ``fromisoformat`` rejects it); aware values are
    converted to UTC and naive values are taken to be UTC already, so every item in a store is
    on one clock. Raises ValueError on anything else.
    """
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    return parsed


def _str_or_none(value: Any) -> str | None:
    """Answers are sometimes numbers in the source data; keep them as text for display."""
    return None if value is None else str(value)


def _split_evidence(raw: Iterable[Any], known: set[str]) -> tuple[list[str], list[str]]:
    """Split, normalise and check evidence strings; return (kept ids, dropped fragments).

    Kept ids are deduplicated in first-seen order. Dropped fragments are the raw pieces that
    did not parse or named no known turn, so readers can report them.
    """
    kept: list[str] = []
    dropped: list[str] = []
    for entry in raw:
        for piece in _EVIDENCE_SPLIT.split(str(entry)):
            if not piece:
                continue
            match = _EVIDENCE_ID.fullmatch(piece)
            if match is None:
                dropped.append(piece)
                continue
            session, turn = match.groups()
            # "D30:05" is written with a zero-padded turn; the data's own ids are unpadded.
            candidates = (f"D{int(session)}:{int(turn)}", f"D{session}:{turn}")
            found = next((c for c in candidates if c in known), None)
            if found is None:
                dropped.append(piece)
            elif found not in kept:
                kept.append(found)
    return kept, dropped


def normalise_evidence_ids(raw: list[str], known: set[str]) -> list[str]:
    """Turn LoCoMo evidence strings into known turn ids, as the datasets README prescribes.

    A handful of evidence entries are malformed ("D8:6; D9:17", "D:11:26", "D30:05", "D"), and
    scoring against ids that name no turn would count unreachable gold as misses. So each entry
    is split on ``[;,\\s]``, each piece must match ``D:?(\\d+):(\\d+)`` and is rewritten as
    ``D<session>:<turn>`` (leading zeros removed), and pieces that name no turn in ``known`` are
    dropped. The result keeps first-seen order without duplicates.
    """
    return _split_evidence(raw, known)[0]


def _iter_json_array(path: Path, chunk_size: int = 1 << 20) -> Iterator[Any]:
    """Yield the elements of a top-level JSON array one at a time.

    LongMemEval's S split is ~280 MB and its M split far larger; parsing it whole with
    ``json.load`` would hold the full object tree in memory alongside the cases built from it.
    Decoding element by element with the stdlib keeps the peak to one question's haystack.
    """
    decoder = json.JSONDecoder()
    with path.open(encoding="utf-8-sig") as fh:
        buf = fh.read(chunk_size)
        eof = len(buf) < chunk_size
        pos = 0

        def skip_ws() -> None:
            nonlocal buf, pos, eof
            while True:
                while pos < len(buf) and buf[pos] in " \t\r\n":
                    pos += 1
                if pos < len(buf) or eof:
                    return
                buf, pos = fh.read(chunk_size), 0
                eof = len(buf) < chunk_size

        skip_ws()
        if pos < len(buf) and buf[pos] == "{":
            # One question a line (the S split's dev sample, longmemeval-s-dev.jsonl).
            fh.seek(0)
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError as exc:
                        raise ValueError(f"{path}: line {number}: {exc}") from None
            return
        if pos >= len(buf) or buf[pos] != "[":
            raise ValueError(f"{path}: expected a JSON array of questions")
        pos += 1
        skip_ws()
        if pos < len(buf) and buf[pos] == "]":
            return
        while True:
            skip_ws()
            while True:
                try:
                    value, end = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError as exc:
                    if eof:
                        raise ValueError(f"{path}: invalid JSON: {exc}") from exc
                else:
                    if end < len(buf) or eof:
                        break
                # Incomplete element: drop what is consumed and read at least as much again,
                # so a large element costs O(log size) re-parses rather than O(size/chunk).
                want = max(chunk_size, len(buf) - pos)
                more = fh.read(want)
                eof = len(more) < want
                buf, pos = buf[pos:] + more, 0
            yield value
            pos = end
            skip_ws()
            if pos >= len(buf):
                raise ValueError(f"{path}: invalid JSON: unterminated array")
            if buf[pos] == "]":
                return
            if buf[pos] != ",":
                raise ValueError(f"{path}: invalid JSON: expected ',' or ']' after an element")
            pos += 1
            if pos > chunk_size:
                buf, pos = buf[pos:], 0


def _as_list(value: Any, what: str) -> list[Any]:
    """Accept a JSON list, or a string holding one (tolerated for re-exported copies).

    The official LongMemEval files (oracle checked) hold real lists; decoding a string costs
    nothing when it is not needed.
    """
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, list):
        raise ValueError(f"{what}: expected a list, got {type(value).__name__}")
    return value


# --------------------------------------------------------------------------------------------
# LoCoMo
# --------------------------------------------------------------------------------------------


def read_locomo(path: str | Path) -> list[BenchCase]:
    """Read LoCoMo (``locomo10.json`` or a subset): one case per conversation.

    Items are the dialog turns: id = ``dia_id`` ("D3:7"), context = the speaker's name,
    session_id = ``"S<N>"``. Text is the turn text; when the turn shared an image, the image's
    caption is appended as ``" [shares a photo: <blip_caption>]"``, because several questions are
    about what was in the photo and the caption is the only trace of it in text. The timestamp
    is the session's ``session_N_date_time`` plus one second per turn index, so the store keeps
    the order of turns within a session. Sessions that only have a date and no turns are
    skipped. Turn metadata keeps the speaker, the raw session date and image fields.

    Questions get ids ``"<sample_id>:q<index>"`` (index into ``qa``) and category ``"1"``..
    ``"5"``. Category 5 (adversarial: the answer is not in the conversation) is kept and only
    flagged by its category; the runner leaves it out of recall scores. Gold ids go through
    :func:`normalise_evidence_ids`; a question whose evidence all drops is kept with empty gold
    (the raw and dropped evidence are in ``metadata``). LoCoMo gives no question date, so
    ``now`` is None.
    """
    path = Path(path)
    with path.open(encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of conversations")
    cases: list[BenchCase] = []
    for index, sample in enumerate(data):
        try:
            cases.append(_locomo_case(sample, index, path))
        except KeyError as exc:
            raise ValueError(f"{path}: conversation {index}: missing field {exc}") from None
        except (AttributeError, TypeError):
            # A list where an object belongs, a number where a list does: another format.
            raise ValueError(
                f"{path}: conversation {index} is not laid out as LoCoMo's (--format?)"
            ) from None
    return cases


def _locomo_case(sample: Any, index: int, path: Path) -> BenchCase:
    """One LoCoMo conversation and its questions (read_locomo)."""
    case_id = str(sample.get("sample_id", f"conv-{index}"))
    conv = sample["conversation"]
    sessions = sorted(
        (int(m.group(1)), value)
        for key, value in conv.items()
        if (m := _LOCOMO_SESSION_KEY.fullmatch(key)) and isinstance(value, list)
    )
    items: list[BenchItem] = []
    for number, turns in sessions:
        raw_date = conv.get(f"session_{number}_date_time")
        if not raw_date:
            raise ValueError(f"{path}: {case_id} session_{number} has no date_time")
        try:
            start = datetime.strptime(raw_date.strip(), LOCOMO_DATE_FORMAT)
        except ValueError as exc:
            raise ValueError(f"{path}: {case_id} session_{number}: {exc}") from exc
        for turn_index, turn in enumerate(turns):
            text = str(turn.get("text", ""))
            caption = turn.get("blip_caption")
            if caption:
                text = f"{text} [shares a photo: {caption}]"
            metadata: dict[str, Any] = {"speaker": turn.get("speaker"), "date": raw_date}
            for extra in ("blip_caption", "img_url", "query"):
                if extra in turn:
                    metadata[extra] = turn[extra]
            items.append(
                BenchItem(
                    id=str(turn["dia_id"]),
                    text=text,
                    timestamp=start + timedelta(seconds=turn_index),
                    context=turn.get("speaker"),
                    session_id=f"S{number}",
                    metadata=metadata,
                )
            )
    known = {item.id for item in items}
    session_of = {item.id: item.session_id for item in items}
    questions: list[BenchQuestion] = []
    for q_index, qa in enumerate(sample.get("qa", [])):
        raw_evidence = list(qa.get("evidence") or [])
        gold, dropped = _split_evidence(raw_evidence, known)
        metadata = {"evidence": raw_evidence}
        if dropped:
            metadata["dropped_evidence"] = dropped
        if "adversarial_answer" in qa:
            metadata["adversarial_answer"] = _str_or_none(qa["adversarial_answer"])
        questions.append(
            BenchQuestion(
                id=f"{case_id}:q{q_index}",
                query=str(qa["question"]),
                now=None,
                category=str(qa.get("category", "default")),
                gold_ids=set(gold),
                gold_sessions={session_of[g] for g in gold if session_of[g]},
                answer=_str_or_none(qa.get("answer")),
                metadata=metadata,
                unanswerable=str(qa.get("category")) == "5",
            )
        )
    return BenchCase(id=case_id, items=items, questions=questions)


# --------------------------------------------------------------------------------------------
# LongMemEval
# --------------------------------------------------------------------------------------------


def _longmemeval_case(record: dict[str, Any], where: str) -> BenchCase | None:
    """Build one case from one LongMemEval question, or None for an abstention question."""
    qid = str(record["question_id"])
    if qid.endswith("_abs"):
        return None
    session_ids = _as_list(record["haystack_session_ids"], f"{where} haystack_session_ids")
    dates = _as_list(record["haystack_dates"], f"{where} haystack_dates")
    sessions = _as_list(record["haystack_sessions"], f"{where} haystack_sessions")
    if not len(session_ids) == len(dates) == len(sessions):
        raise ValueError(f"{where}: haystack ids, dates and sessions differ in length")
    items: list[BenchItem] = []
    gold: set[str] = set()
    assistant_gold: list[str] = []
    seen_sessions: set[str] = set()
    for raw_sid, raw_date, turns in zip(session_ids, dates, sessions, strict=True):
        sid = str(raw_sid)
        if sid in seen_sessions:
            # A repeated session would repeat item ids; its turns are already in the store.
            continue
        seen_sessions.add(sid)
        start = datetime.strptime(str(raw_date).strip(), LONGMEMEVAL_DATE_FORMAT)
        for turn_index, turn in enumerate(turns):
            item_id = f"{sid}:{turn_index}"
            has_answer = bool(turn.get("has_answer", False))
            if turn.get("role") != "user":
                if has_answer:
                    assistant_gold.append(item_id)
                continue
            items.append(
                BenchItem(
                    id=item_id,
                    text=turn.get("content", ""),
                    timestamp=start + timedelta(seconds=turn_index),
                    context=None,
                    session_id=sid,
                    metadata={"turn_index": turn_index},
                )
            )
            if has_answer:
                gold.add(item_id)
    metadata: dict[str, Any] = {}
    if assistant_gold:
        metadata["assistant_gold_ids"] = assistant_gold
    question = BenchQuestion(
        id=qid,
        query=str(record["question"]),
        now=datetime.strptime(str(record["question_date"]).strip(), LONGMEMEVAL_DATE_FORMAT),
        category=str(record.get("question_type", "default")),
        gold_ids=gold,
        gold_sessions={str(s) for s in _as_list(record["answer_session_ids"], where)},
        answer=_str_or_none(record.get("answer")),
        metadata=metadata,
    )
    return BenchCase(id=qid, items=items, questions=[question])


def iter_longmemeval(path: str | Path) -> Iterator[BenchCase]:
    """Stream :func:`read_longmemeval`'s cases, one question's haystack in memory at a time.

    Prefer this for the S and M splits, whose haystacks are hundreds of MB in total.
    """
    path = Path(path)
    for index, record in enumerate(_iter_json_array(path)):
        where = f"{path}: question {index}"
        try:
            case = _longmemeval_case(record, where)
        except KeyError as exc:
            raise ValueError(f"{where}: missing field {exc}") from exc
        if case is not None:
            yield case


def read_longmemeval(path: str | Path) -> list[BenchCase]:
    """Read LongMemEval (oracle, S, M or any file in the same format): one case per question.

    Follows the benchmark's own retrieval protocol: abstention questions (``question_id``
    ending in ``_abs``) are skipped, and only USER turns are indexed. Item id is
    ``"<session_id>:<turn_index>"`` where the turn index counts all roles in the original
    session (so ids stay stable against the source); session_id is the haystack session id;
    timestamp is the session's ``haystack_dates`` entry plus one second per turn index. The
    question's ``now`` is ``question_date`` and its category ``question_type``. Gold is two-level:
    ``gold_ids`` = user turns with ``has_answer`` true, ``gold_sessions`` =
    ``answer_session_ids``. Gold found only in assistant turns (most single-session-assistant
    questions) cannot be retrieved under this protocol; those ids are listed in
    ``metadata["assistant_gold_ids"]`` and the turn-level gold may be empty. A session id that
    repeats within one haystack is indexed once.
    """
    return list(iter_longmemeval(path))


# --------------------------------------------------------------------------------------------
# LongMemEval S, one question a line (``--format lme``)
# --------------------------------------------------------------------------------------------


def _lme_case(record: dict[str, Any], where: str) -> BenchCase:
    """One question of a LongMemEval file with one JSON object a line, as the benchmark's
    retrieval protocol on the S split asks: its own store, the USER turns of its haystack
    retained with ids ``SESSIONID_TURN`` (the turn index counts every role, so ids match the
    source) and the session as their document, asked at ``question_date``, gold at session
    level (``answer_session_ids``), plus turn-level gold where a user turn has ``has_answer``.

    Abstention questions (``_abs``) are kept, marked ``unanswerable``: they are asked to
    measure the relevance floor, never scored for recall."""
    qid = str(record["question_id"])
    session_ids = _as_list(record["haystack_session_ids"], f"{where} haystack_session_ids")
    dates = _as_list(record["haystack_dates"], f"{where} haystack_dates")
    sessions = _as_list(record["haystack_sessions"], f"{where} haystack_sessions")
    if not len(session_ids) == len(dates) == len(sessions):
        raise ValueError(f"{where}: haystack ids, dates and sessions differ in length")
    items: list[BenchItem] = []
    gold: set[str] = set()
    seen_sessions: set[str] = set()
    for raw_sid, raw_date, turns in zip(session_ids, dates, sessions, strict=True):
        sid = str(raw_sid)
        if sid in seen_sessions:
            continue  # its turns are in the store already (ids would repeat)
        seen_sessions.add(sid)
        try:
            start = datetime.strptime(str(raw_date).strip(), LONGMEMEVAL_DATE_FORMAT)
        except ValueError as exc:
            raise ValueError(f"{where}: session {sid}: {exc}") from None
        for turn_index, turn in enumerate(_as_list(turns, f"{where} session {sid}")):
            if not isinstance(turn, dict) or turn.get("role") != "user":
                continue
            item_id = f"{sid}_{turn_index}"
            items.append(
                BenchItem(
                    id=item_id,
                    text=str(turn.get("content", "")),
                    timestamp=start + timedelta(seconds=turn_index),
                    session_id=sid,
                    document_id=sid,
                    metadata={"turn_index": turn_index},
                )
            )
            if turn.get("has_answer"):
                gold.add(item_id)
    unanswerable = qid.endswith("_abs")
    question = BenchQuestion(
        id=qid,
        query=str(record["question"]),
        now=datetime.strptime(str(record["question_date"]).strip(), LONGMEMEVAL_DATE_FORMAT),
        category=str(record.get("question_type", "default")),
        gold_ids=set() if unanswerable else gold,
        gold_sessions=(
            set()
            if unanswerable
            else {str(s) for s in _as_list(record["answer_session_ids"], where)} & seen_sessions
        ),
        answer=_str_or_none(record.get("answer")),
        metadata={"nearest_sessions": list(record.get("answer_session_ids") or [])}
        if unanswerable
        else {},
        unanswerable=unanswerable,
    )
    return BenchCase(id=qid, items=items, questions=[question])


def iter_lme(path: str | Path) -> Iterator[BenchCase]:
    """Stream a LongMemEval file of one question a line (longmemeval-s-dev.jsonl): one case
    per question, one question's haystack in memory at a time (see _lme_case)."""
    path = Path(path)
    with path.open(encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}: line {lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: invalid JSON: {exc.msg}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{where}: expected a JSON object (one question a line)")
            try:
                yield _lme_case(record, where)
            except KeyError as exc:
                raise ValueError(f"{where}: missing field {exc}") from None
            except (AttributeError, TypeError):
                raise ValueError(f"{where}: not laid out as LongMemEval's (--format?)") from None


# --------------------------------------------------------------------------------------------
# Generic JSONL
# --------------------------------------------------------------------------------------------

JSONL_FORMAT_DOC = """\
Generic JSONL benchmark format (``mem bench --format jsonl FILE``)

One JSON object per line; blank lines are ignored. Each object has a ``"type"`` of ``"item"``
or ``"question"``. ``"case"`` names the store the line belongs to: every case is retained into
its own fresh store and only its own questions are asked against it. When ``"case"`` is absent
the line belongs to the case ``"default"``, so a file without any ``"case"`` is one store.
Lines may come in any order.

Item (something to retain):

    {"type": "item", "case": "c1", "id": "m1", "text": "Alice moved to Lisbon.",
     "timestamp": "2024-03-01T09:30:00Z", "context": "chat with Alice", "session": "s1"}

    id         required, string, unique within the case
    text       required, string
    timestamp  required, ISO 8601 ("2024-03-01", "2024-03-01T09:30:00", "...Z", "...+02:00");
               converted to UTC, values without a zone are taken as UTC
    context    optional string retained with the item (speaker, source, ...)
    session    optional string grouping items for session-level scores
    metadata   optional object, passed through untouched

Question (a recall query with its gold answers):

    {"type": "question", "case": "c1", "id": "q1", "query": "Where does Alice live now?",
     "now": "2024-06-01T12:00:00Z", "category": "knowledge-update", "gold": ["m1"],
     "checklist": ["Alice lives in Lisbon"], "distractors": ["m0"], "answer": "Lisbon"}

    id             required, string, unique within the case
    query          required, string
    gold           required, list of item ids of the same case (may be empty: the question
                   is then counted but not scored)
    now            optional ISO 8601 time the question is asked (for "last week" etc.)
    category       optional string, scores are also reported per category (default "default")
    gold_sessions  optional list of session names for session-level scores; when absent it
                   is derived from the sessions of the gold items
    checklist      optional list of strings: facts a good answer context must contain,
                   scored as checklistCoverage
    distractors    optional list of item ids that look relevant but are wrong/outdated,
                   scored as distractorRate (share of the top k that are distractors)
    answer         optional reference answer, shown in reports only
    unanswerable   optional true: nothing in the case answers it (gold must be empty or
                   absent); asked to measure the relevance floor, never scored for recall

Every gold and distractor id must name an item of the same case. Any malformed line, unknown
type, missing or mistyped field, duplicate id or dangling id is a ValueError naming the line.
"""


def _field(obj: dict[str, Any], key: str, kind: type, lineno: int, required: bool) -> Any:
    """Fetch and type-check one field so every error names the line and the field."""
    if key not in obj or obj[key] is None:
        if required:
            raise ValueError(f"line {lineno}: missing required field {key!r}")
        return None
    value = obj[key]
    if kind is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        if key in ("id", "case", "session"):
            return str(value)
    if not isinstance(value, kind):
        raise ValueError(f"line {lineno}: field {key!r} must be {kind.__name__}")
    return value


def _str_list(obj: dict[str, Any], key: str, lineno: int, required: bool = False) -> list[str]:
    """Fetch a list of strings (ids or checklist points); ids given as numbers are accepted."""
    value = _field(obj, key, list, lineno, required)
    if value is None:
        return []
    out: list[str] = []
    for element in value:
        if isinstance(element, bool) or not isinstance(element, (str, int)):
            raise ValueError(f"line {lineno}: field {key!r} must be a list of strings")
        out.append(str(element))
    return out


def _time_field(obj: dict[str, Any], key: str, lineno: int, required: bool) -> datetime | None:
    """Parse an ISO 8601 field, reporting the line on failure."""
    value = _field(obj, key, str, lineno, required)
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        raise ValueError(f"line {lineno}: field {key!r} is not ISO 8601: {value!r}") from None


def read_jsonl(path: str | Path) -> list[BenchCase]:
    """Read the generic JSONL format so users can bench ``mem`` on their own data.

    The format is documented in ``JSONL_FORMAT_DOC`` (module constant, README-ready). Cases come
    out in order of first appearance; items and questions keep file order within a case.
    """
    path = Path(path)
    items: dict[str, list[BenchItem]] = {}
    questions: dict[str, list[tuple[int, BenchQuestion, bool]]] = {}
    item_ids: dict[str, set[str]] = {}
    question_ids: dict[str, set[str]] = {}
    order: list[str] = []
    with path.open(encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {lineno}: invalid JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise ValueError(f"line {lineno}: expected a JSON object")
            kind = obj.get("type")
            if kind not in ("item", "question"):
                raise ValueError(
                    f"line {lineno}: field 'type' must be 'item' or 'question', got {kind!r}"
                )
            case = _field(obj, "case", str, lineno, required=False) or "default"
            if case not in items:
                order.append(case)
                items[case], questions[case] = [], []
                item_ids[case], question_ids[case] = set(), set()
            ident = _field(obj, "id", str, lineno, required=True)
            if kind == "item":
                if ident in item_ids[case]:
                    raise ValueError(f"line {lineno}: duplicate item id {ident!r} in {case!r}")
                item_ids[case].add(ident)
                items[case].append(
                    BenchItem(
                        id=ident,
                        text=_field(obj, "text", str, lineno, required=True),
                        timestamp=_time_field(obj, "timestamp", lineno, required=True),
                        context=_field(obj, "context", str, lineno, required=False),
                        session_id=_field(obj, "session", str, lineno, required=False),
                        metadata=_field(obj, "metadata", dict, lineno, required=False) or {},
                    )
                )
            else:
                if ident in question_ids[case]:
                    raise ValueError(f"line {lineno}: duplicate question id {ident!r} in {case!r}")
                question_ids[case].add(ident)
                has_sessions = obj.get("gold_sessions") is not None
                category = _field(obj, "category", str, lineno, required=False)
                unanswerable = _field(obj, "unanswerable", bool, lineno, required=False)
                question = BenchQuestion(
                    id=ident,
                    query=_field(obj, "query", str, lineno, required=True),
                    now=_time_field(obj, "now", lineno, required=False),
                    category=category or "default",
                    gold_ids=set(_str_list(obj, "gold", lineno, required=not unanswerable)),
                    gold_sessions=set(_str_list(obj, "gold_sessions", lineno)),
                    checklist=_str_list(obj, "checklist", lineno),
                    distractor_ids=set(_str_list(obj, "distractors", lineno)),
                    answer=_str_or_none(obj.get("answer")),
                    unanswerable=bool(unanswerable),
                )
                if question.unanswerable and question.gold_ids:
                    raise ValueError(
                        f"line {lineno}: question {ident!r} is unanswerable but has gold ids"
                    )
                questions[case].append((lineno, question, has_sessions))
    cases: list[BenchCase] = []
    for case in order:
        session_of = {item.id: item.session_id for item in items[case]}
        for lineno, question, has_sessions in questions[case]:
            checks = (("gold", question.gold_ids), ("distractor", question.distractor_ids))
            for label, ids in checks:
                missing = sorted(ids - session_of.keys())
                if missing:
                    raise ValueError(
                        f"line {lineno}: {label} id {missing[0]!r} of question {question.id!r}"
                        f" names no item in case {case!r}"
                    )
            if not has_sessions:
                question.gold_sessions = {
                    s for g in question.gold_ids if (s := session_of[g]) is not None
                }
        cases.append(
            BenchCase(id=case, items=items[case], questions=[q for _, q, _ in questions[case]])
        )
    return cases


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------


def iter_dataset(path: str | Path, fmt: str) -> Iterator[BenchCase]:
    """Yield cases lazily where the format allows it (LongMemEval), so big splits stream."""
    if fmt == "longmemeval":
        return _checked(iter_longmemeval(path))
    if fmt == "lme":
        return _checked(iter_lme(path))
    return _checked(iter(read_dataset(path, fmt)))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _checked(cases: Iterator[BenchCase]) -> Iterator[BenchCase]:
    """Each case as read, refused (ValueError) when a text holds a lone surrogate: JSON's
    "\\ud800" escape reads as one, and nothing can store, print or report it (found at the
    end, it cost the whole run and its report)."""
    for case in cases:
        texts = [(f"item {i.id!r}", i.text) for i in case.items]
        texts += [(f"question {q.id!r}", q.query) for q in case.questions]
        texts += [(f"question {q.id!r} answer", q.answer or "") for q in case.questions]
        for what, text in texts:
            if _SURROGATE.search(text):
                raise ValueError(f"case {case.id!r} {what} contains a lone surrogate")
        yield case


def read_dataset(path: str | Path, fmt: str) -> list[BenchCase]:
    """Read ``path`` as ``fmt`` (one of ``FORMATS``): the single entry point for ``mem bench``."""
    readers = {
        "locomo": read_locomo,
        "longmemeval": read_longmemeval,
        "lme": lambda p: list(iter_lme(p)),
        "jsonl": read_jsonl,
    }
    reader = readers.get(fmt)
    if reader is None:
        raise ValueError(f"unknown dataset format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return reader(path)
