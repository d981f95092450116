"""Dataset readers on small hand-made files, plus counts on the real benchmark files if present."""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from memcli.bench import datasets as ds
from memcli.bench.datasets import (
    BenchCase,
    normalise_evidence_ids,
    read_dataset,
    read_jsonl,
    read_locomo,
    read_longmemeval,
)


def _datasets_dir() -> Path:
    """The shared, read-only benchmark folder (/work/shared/datasets), or $MEM_DATASETS."""
    env = os.environ.get("MEM_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared/datasets"


# --------------------------------------------------------------------------------------------
# LoCoMo
# --------------------------------------------------------------------------------------------


def _locomo_file(tmp_path: Path) -> Path:
    conv = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob!"},
            {
                "speaker": "Bob",
                "dia_id": "D1:2",
                "text": "Look at my dog.",
                "img_url": ["http://x/y.jpg"],
                "blip_caption": "a photo of a brown dog",
            },
            {"speaker": "Ann", "dia_id": "D1:3", "text": "Cute."},
        ],
        "session_2_date_time": "9:05 am on 11 June, 2023",
        "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "I moved to Oslo."}],
        # dated but empty in the source: a session key with only a date is skipped
        "session_3_date_time": "10:00 am on 1 July, 2023",
    }
    # session 10 exists so "D10:1" is the normalised id of a zero-padded "D10:01"
    conv["session_10_date_time"] = "8:00 pm on 2 August, 2023"
    conv["session_10"] = [{"speaker": "Ann", "dia_id": "D10:1", "text": "Back home."}]
    qa = [
        {"question": "Where did Bob move?", "answer": "Oslo", "evidence": ["D2:1"], "category": 4},
        # malformed: two ids in one string, an extra colon, a padded id, a missing session
        {
            "question": "What pet?",
            "answer": 2022,
            "evidence": ["D1:2; D2:1", "D:1:3", "D10:01", "D30:05", "D"],
            "category": 1,
        },
        {"question": "Unknown?", "answer": "x", "evidence": ["D30:05"], "category": 3},
        {"question": "Adversarial?", "adversarial_answer": "no", "evidence": [], "category": 5},
    ]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([{"sample_id": "conv-1", "conversation": conv, "qa": qa}]))
    return path


def test_normalise_evidence_ids() -> None:
    known = {"D8:6", "D9:17", "D11:26", "D1:5"}
    # "D8:6; D9:17" splits in two; "D:11:26" loses its stray colon; "D30:05" names no turn
    raw = ["D8:6; D9:17", "D:11:26", "D30:05", "D1:05", "D8:6", "junk", "D1,D1:5"]
    assert normalise_evidence_ids(raw, known) == ["D8:6", "D9:17", "D11:26", "D1:5"]
    assert normalise_evidence_ids([], known) == []


def test_read_locomo(tmp_path: Path) -> None:
    [case] = read_locomo(_locomo_file(tmp_path))
    assert case.id == "conv-1"
    assert [i.id for i in case.items] == ["D1:1", "D1:2", "D1:3", "D2:1", "D10:1"]
    first, photo, third, moved, _ = case.items
    assert photo.text == "Look at my dog. [shares a photo: a photo of a brown dog]"
    assert photo.context == "Bob" and photo.session_id == "S1"
    assert photo.metadata["img_url"] == ["http://x/y.jpg"]
    # session time plus one second per turn keeps the order
    assert first.timestamp == datetime(2023, 5, 8, 13, 56, 0)
    assert third.timestamp == datetime(2023, 5, 8, 13, 56, 2)
    assert moved.timestamp == datetime(2023, 6, 11, 9, 5, 0)
    assert moved.session_id == "S2"

    q_move, q_pet, q_unknown, q_adv = case.questions
    assert q_move.id == "conv-1:q0" and q_move.category == "4"
    assert q_move.gold_ids == {"D2:1"} and q_move.gold_sessions == {"S2"}
    assert q_move.now is None
    assert q_pet.gold_ids == {"D1:2", "D2:1", "D1:3", "D10:1"}
    assert q_pet.gold_sessions == {"S1", "S2", "S10"}
    assert q_pet.metadata["dropped_evidence"] == ["D30:05", "D"]
    assert q_pet.answer == "2022"  # numeric answers become text
    # all evidence dropped -> kept, with empty gold, for the runner to skip and count
    assert q_unknown.gold_ids == set() and q_unknown.category == "3"
    # category 5 is kept, only flagged by its category
    assert q_adv.category == "5" and q_adv.answer is None
    assert q_adv.metadata["adversarial_answer"] == "no"


# --------------------------------------------------------------------------------------------
# LongMemEval
# --------------------------------------------------------------------------------------------


def _lme_record(qid: str, qtype: str = "single-session-user") -> dict:
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": "Where did I park?",
        "answer": 3,
        "question_date": "2023/05/28 (Sun) 19:47",
        "haystack_dates": ["2023/05/20 (Sat) 10:00", "2023/05/21 (Sun) 16:07"],
        "haystack_session_ids": ["s_a", "answer_b"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "hello", "has_answer": False},
                {"role": "assistant", "content": "hi", "has_answer": False},
            ],
            [
                {"role": "user", "content": "I parked on level 3.", "has_answer": True},
                {"role": "assistant", "content": "Level 3, noted.", "has_answer": True},
                {"role": "user", "content": "thanks"},  # has_answer may be absent
            ],
        ],
        "answer_session_ids": ["answer_b"],
    }


def _lme_file(tmp_path: Path) -> Path:
    records = [_lme_record("q1"), _lme_record("q2_abs"), _lme_record("q3", "temporal-reasoning")]
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(records, indent=1))
    return path


def test_read_longmemeval(tmp_path: Path) -> None:
    cases = read_longmemeval(_lme_file(tmp_path))
    # q2_abs is an abstention question -> skipped; one case per remaining question
    assert [c.id for c in cases] == ["q1", "q3"]
    case = cases[0]
    # user turns only; turn index counts all roles, so the second user turn of answer_b is :2
    assert [i.id for i in case.items] == ["s_a:0", "answer_b:0", "answer_b:2"]
    assert [i.session_id for i in case.items] == ["s_a", "answer_b", "answer_b"]
    assert case.items[2].timestamp == datetime(2023, 5, 21, 16, 7, 2)
    [q] = case.questions
    assert q.now == datetime(2023, 5, 28, 19, 47)
    assert q.category == "single-session-user"
    # turn gold = user turns with has_answer; the assistant's has_answer turn is not indexed
    assert q.gold_ids == {"answer_b:0"}
    assert q.metadata["assistant_gold_ids"] == ["answer_b:1"]
    assert q.gold_sessions == {"answer_b"}
    assert q.answer == "3"
    assert cases[1].questions[0].category == "temporal-reasoning"


def test_longmemeval_one_question_a_line(tmp_path: Path) -> None:
    """The S split's dev sample is JSONL (one question a line): the same cases as the array."""
    records = [_lme_record("q1"), _lme_record("q2_abs"), _lme_record("q3", "temporal-reasoning")]
    path = tmp_path / "lme-s-dev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert read_longmemeval(path) == read_longmemeval(_lme_file(tmp_path))
    path.write_text(json.dumps(records[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match="line 2"):
        read_longmemeval(path)


def test_longmemeval_string_encoded_lists_and_errors(tmp_path: Path) -> None:
    record = _lme_record("q1")
    for key in ("haystack_dates", "haystack_session_ids", "haystack_sessions"):
        record[key] = json.dumps(record[key])
    path = tmp_path / "enc.json"
    path.write_text(json.dumps([record]))
    assert [i.id for i in read_longmemeval(path)[0].items] == ["s_a:0", "answer_b:0", "answer_b:2"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question_id": "q"}]))
    with pytest.raises(ValueError, match="missing field"):
        read_longmemeval(bad)
    bad.write_text('[{"question_id": "q1_abs"}, ')
    with pytest.raises(ValueError, match="invalid JSON"):
        read_longmemeval(bad)


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1 << 20])
def test_streaming_json_array_matches_json_load(tmp_path: Path, chunk: int) -> None:
    # elements larger than the chunk, nested strings with brackets/commas, odd whitespace
    data = [{"a": "x" * 50, "b": ["[,]", {"c": 1.5}]}, {}, [1, 2], "s\u00e9", 3, None]
    path = tmp_path / "arr.json"
    path.write_text("\ufeff \n[ " + " ,\n".join(json.dumps(d) for d in data) + " ]\n")
    assert list(ds._iter_json_array(path, chunk_size=chunk)) == data
    path.write_text("[]")
    assert list(ds._iter_json_array(path, chunk_size=chunk)) == []


# --------------------------------------------------------------------------------------------
# Generic JSONL
# --------------------------------------------------------------------------------------------


def _write_lines(tmp_path: Path, lines: list[object]) -> Path:
    path = tmp_path / "bench.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_read_jsonl(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path,
        [
            # a question may come before its items
            {"type": "question", "case": "c2", "id": "q9", "query": "where?", "gold": ["m1"]},
            {
                "type": "item",
                "case": "c1",
                "id": "m1",
                "text": "Alice moved to Lisbon.",
                "timestamp": "2024-03-01T09:30:00Z",
                "context": "chat",
                "session": "s1",
            },
            {
                "type": "item",
                "case": "c1",
                "id": "m0",
                "text": "Alice lives in Berlin.",
                "timestamp": "2023-01-01T12:00:00+02:00",
            },
            "",
            {
                "type": "question",
                "case": "c1",
                "id": "q1",
                "query": "Where does Alice live?",
                "now": "2024-06-01",
                "category": "update",
                "gold": ["m1"],
                "checklist": ["Alice lives in Lisbon"],
                "distractors": ["m0"],
                "answer": "Lisbon",
            },
            {"type": "item", "case": "c2", "id": "m1", "text": "t", "timestamp": "2024-01-01"},
        ],
    )
    c2, c1 = read_jsonl(path)  # cases in order of first appearance
    assert (c2.id, c1.id) == ("c2", "c1")
    assert [i.id for i in c1.items] == ["m1", "m0"]
    m1, m0 = c1.items
    assert m1.timestamp == datetime(2024, 3, 1, 9, 30)  # Z -> naive UTC
    assert m0.timestamp == datetime(2023, 1, 1, 10, 0)  # +02:00 -> converted to UTC
    assert (m1.context, m1.session_id, m0.session_id) == ("chat", "s1", None)
    [q1] = c1.questions
    assert q1.now == datetime(2024, 6, 1)
    assert q1.category == "update" and q1.answer == "Lisbon"
    assert q1.gold_ids == {"m1"} and q1.distractor_ids == {"m0"}
    assert q1.checklist == ["Alice lives in Lisbon"]
    assert q1.gold_sessions == {"s1"}  # derived from the gold items' sessions
    [q9] = c2.questions
    assert q9.category == "default" and q9.now is None and q9.gold_sessions == set()


def test_read_jsonl_default_case(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path,
        [
            {"type": "item", "id": "a", "text": "x", "timestamp": "2024-01-01T00:00:00"},
            {"type": "question", "id": "q", "query": "x?", "gold": [], "gold_sessions": ["s"]},
        ],
    )
    [case] = read_dataset(path, "jsonl")
    assert case.id == "default"
    assert case.questions[0].gold_ids == set() and case.questions[0].gold_sessions == {"s"}


ITEM = {"type": "item", "id": "a", "text": "x", "timestamp": "2024-01-01"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: invalid JSON"),
        ("[1, 2]", "line 2: expected a JSON object"),
        ({"type": "note", "id": "n"}, "line 2: field 'type' must be 'item' or 'question'"),
        ({"type": "item", "id": "b", "text": "x"}, "line 2: missing required field 'timestamp'"),
        ({**ITEM, "id": "b", "timestamp": "yesterday"}, "line 2: field 'timestamp' is not ISO"),
        ({**ITEM, "id": "b", "text": 5}, "line 2: field 'text' must be str"),
        (ITEM, "line 2: duplicate item id 'a'"),
        ({"type": "question", "id": "q", "query": "?"}, "line 2: missing required field 'gold'"),
        ({"type": "question", "id": "q", "query": "?", "gold": "a"}, "field 'gold' must be list"),
        ({"type": "question", "id": "q", "query": "?", "gold": ["zz"]}, "line 2: gold id 'zz'"),
        (
            {"type": "question", "id": "q", "query": "?", "gold": ["a"], "distractors": ["zz"]},
            "line 2: distractor id 'zz'",
        ),
    ],
)
def test_read_jsonl_errors(tmp_path: Path, line: object, message: str) -> None:
    path = _write_lines(tmp_path, [ITEM, line])
    with pytest.raises(ValueError, match=message):
        read_jsonl(path)


def test_read_dataset_dispatch(tmp_path: Path) -> None:
    assert read_dataset(_locomo_file(tmp_path), "locomo")[0].id == "conv-1"
    assert [c.id for c in ds.iter_dataset(_lme_file(tmp_path), "longmemeval")] == ["q1", "q3"]
    with pytest.raises(ValueError, match="unknown dataset format"):
        read_dataset(tmp_path / "x", "csv")


# --------------------------------------------------------------------------------------------
# Real data (read-only, shared; skipped when absent)
# --------------------------------------------------------------------------------------------


def _real(name: str) -> Path:
    path = _datasets_dir() / name
    if not path.is_file():
        pytest.skip(f"{path} not available")
    return path


def test_real_locomo_counts() -> None:
    cases: list[BenchCase] = read_locomo(_real("locomo-dev.json"))
    assert [c.id for c in cases] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
    assert sum(len(c.items) for c in cases) == 2760
    questions = [q for c in cases for q in c.questions]
    assert len(questions) == 999
    assert Counter(q.category for q in questions) == {
        "1": 142,
        "2": 156,
        "3": 46,
        "4": 418,
        "5": 237,
    }
    # two category-3 questions in conv-26 have no evidence at all
    assert sorted(q.id for q in questions if not q.gold_ids) == ["conv-26:q30", "conv-26:q46"]
    dropped = {q.id: q.metadata.get("dropped_evidence") for q in questions}
    dropped = {qid: d for qid, d in dropped.items() if d}
    # conv-42 cites "D10:19" (session 10 has 16 turns) and a bare "D"
    assert dropped == {"conv-42:q58": ["D10:19"], "conv-42:q88": ["D"]}
    by_id = {q.id: q for q in questions}
    split = next(q for q in questions if "D8:6; D9:17" in q.metadata["evidence"])
    assert {"D8:6", "D9:17"} <= split.gold_ids
    colon = next(q for q in questions if "D:11:26" in q.metadata["evidence"])
    assert "D11:26" in colon.gold_ids
    assert by_id["conv-26:q0"].gold_ids == {"D1:3"}
    for case in cases:
        times = [i.timestamp for i in case.items]
        assert times == sorted(times)
        assert len({i.id for i in case.items}) == len(case.items)


def test_real_longmemeval_oracle_counts() -> None:
    cases = read_longmemeval(_real("longmemeval-oracle.json"))
    # 500 questions, 30 abstention ("_abs") skipped
    assert len(cases) == 470
    assert all(len(c.questions) == 1 for c in cases)
    assert sum(len(c.items) for c in cases) == 5143  # user turns only
    questions = [c.questions[0] for c in cases]
    assert Counter(q.category for q in questions) == {
        "temporal-reasoning": 127,
        "multi-session": 121,
        "knowledge-update": 72,
        "single-session-user": 64,
        "single-session-assistant": 56,
        "single-session-preference": 30,
    }
    # the gold of 51 single-session-assistant questions lives only in assistant turns
    no_turn_gold = [q for q in questions if not q.gold_ids]
    assert len(no_turn_gold) == 51
    assert {q.category for q in no_turn_gold} == {"single-session-assistant"}
    assert all(q.gold_sessions for q in questions)
    for case in cases:
        sessions = {i.session_id for i in case.items}
        assert case.questions[0].gold_sessions <= sessions
        assert case.questions[0].gold_ids <= {i.id for i in case.items}
