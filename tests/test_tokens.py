"""Token counts without the tokenizer: a memory block's count is its date's (by shape) plus
the count its fact stored when written, and that sum equals tiktoken's count of the whole
block. Checked on real text, on text built to break the pre-tokenizer's cut, and through a
real store (retain, the schema-6 upgrade, a read-only old file, a recall process)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memcli import tokens
from memcli.blocks import block_tokens, memory_block, tail_tokens
from memcli.store import Fact, Store
from memcli.store.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent


def test_every_run_of_one_to_three_digits_is_one_token():
    """What count_tokens_any_digits rests on: digits can be swapped without changing a count."""
    enc = tokens.get_encoding()
    runs = [f"{n:0{width}d}" for width in (1, 2, 3) for n in range(10**width)]
    assert len(runs) == 1110
    assert all(len(enc.encode_ordinary(r)) == 1 for r in runs)
    # ...and a run never joins what is around it.
    for text in ["[2026-03-21]", "x2026y", "a1234567b", "said 1999-12-31, about 2000"]:
        zeros = text.translate(str.maketrans("123456789", "000000000"))
        assert tokens.count_tokens(text) == tokens.count_tokens(zeros), text


def real_texts() -> list[tuple[str | None, str]]:
    """(context, text) of the built-in sample and the CJK dev set: English, Chinese,
    Japanese, Korean as users write them."""
    out = []
    for path in [ROOT / "memcli/data/sample.jsonl", ROOT / "bench/data/cjk-dev.jsonl"]:
        for line in path.read_text().splitlines():
            obj = json.loads(line)
            for key in ("text", "content", "question"):
                if isinstance(obj.get(key), str):
                    out.append((obj.get("context") or obj.get("speaker"), obj[key]))
            for turn in obj.get("turns", []) if isinstance(obj.get("turns"), list) else []:
                if isinstance(turn, dict) and isinstance(turn.get("text"), str):
                    out.append((turn.get("speaker"), turn["text"]))
    return out


# Text whose first characters meet the block's "] " or ": " in every way the cl100k
# pre-tokenizer distinguishes: letters, digits, contractions, punctuation runs, spaces,
# newlines, symbols, CJK, emoji, combining marks.
EDGE_TEXTS = [
    "'s going to rain",
    "'ll see",
    "3 cats and 12 dogs",
    "2026 was a good year",
    "...and then it rained",
    "] odd start",
    ": colon start",
    "  two spaces",
    "\nnewline first",
    " \n mixed",
    "\u00e9t\u00e9 \u00e0 Paris",
    "\u0301combining first",
    "\U0001f600 smiled",
    "\u4eca\u5929\u5f88\u597d",
    "(aside) noted",
    "-dash",
    "\t\ttabbed",
    "x",
]
EDGE_CONTEXTS = [None, "", "Maya", "user", "Dr. O'Neil", "12", "\u5f20\u4f1f", "a: b"]

SAID = datetime(2026, 2, 10, 23, 30)  # late evening UTC: local dates differ by zone
TIMES = [
    (None, None),
    (datetime(2026, 2, 10), datetime(2026, 2, 11)),  # the day it was said
    (datetime(2026, 11, 1), datetime(2026, 12, 1)),  # a month ahead: "future when said"
    (datetime(2025, 1, 1), datetime(2026, 1, 1)),  # a year
    (datetime(2026, 4, 4), datetime(2026, 4, 19)),  # a range
    (datetime(2019, 12, 30), datetime(2020, 1, 2)),
]


def fact(context: str | None, text: str, start, end, stored: bool = True) -> Fact:
    return Fact(
        id=1,
        text=text,
        context=context,
        fact_type="world",
        mentioned_at=SAID,
        occurred_start=start,
        occurred_end=end,
        tags=[],
        metadata={},
        proof_count=1,
        source_id=None,
        document_id=None,
        chunk_id=None,
        entities=[],
        tail_tokens=tail_tokens(context, text) if stored else None,
    )


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/Los_Angeles"])
def test_block_count_from_parts_equals_tiktoken_on_the_whole_block(zone, monkeypatch):
    monkeypatch.setenv("TZ", zone)
    texts = real_texts()
    assert len(texts) > 50
    pairs = texts + [(c, t) for c in EDGE_CONTEXTS for t in EDGE_TEXTS]
    checked = 0
    for context, text in pairs:
        for start, end in TIMES:
            f = fact(context, text, start, end)
            assert block_tokens(f) == tokens.count_tokens(memory_block(f)), (zone, context, text)
            checked += 1
    assert checked > 1000


def test_a_fact_without_a_stored_count_is_counted_whole():
    f = fact("Maya", "booked the Lisbon flat", None, None, stored=False)
    assert f.tail_tokens is None
    assert block_tokens(f) == tokens.count_tokens(memory_block(f))


@pytest.fixture
def shapes_file(tmp_path, monkeypatch):
    path = tmp_path / "cache" / "shapes.json"
    monkeypatch.setattr(tokens, "_shapes_path", lambda: path)
    monkeypatch.setattr(tokens, "_shapes", None)
    return path


@pytest.mark.parametrize(
    "content", [None, "", "{not json", "[1, 2]", '{"[0000-00-00]": "nine"}', '{"[0000]": -1}']
)
def test_date_shapes_survive_a_missing_or_damaged_cache_file(shapes_file, monkeypatch, content):
    if content is not None:
        shapes_file.parent.mkdir(parents=True)
        shapes_file.write_text(content)
    assert tokens.count_tokens_any_digits("[2026-03-21]") == tokens.count_tokens("[2026-03-21]")
    saved = json.loads(shapes_file.read_text())
    assert saved["[0000-00-00]"] == tokens.count_tokens("[2026-03-21]")
    # A new process reads the counts back without counting.
    monkeypatch.setattr(tokens, "_shapes", None)
    assert tokens._known_shapes()["[0000-00-00]"] == saved["[0000-00-00]"]


def test_date_shapes_count_right_when_the_cache_cannot_be_written(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(tokens, "_shapes_path", lambda: blocker / "shapes.json")
    monkeypatch.setattr(tokens, "_shapes", None)
    text = "[said 2026-02-10, about 2026-11]"
    assert tokens.count_tokens_any_digits(text) == tokens.count_tokens(text)
    assert blocker.read_text() == "not a folder"


def test_retained_and_imported_facts_carry_their_tail_count(store, remember, tmp_path):
    remember("Maya booked the Lisbon flat for May.", context="Maya")
    remember("'s a plain note about 3 things")
    bank = store.banks.require_bank("default")
    facts = list(store.facts.facts_by_id(store.facts.fact_ids_of_bank(bank), bank).values())
    assert len(facts) == 2
    for f in facts:
        assert f.tail_tokens == tokens.count_tokens(
            memory_block(f)[memory_block(f).index("]") + 1 :]
        )
    # Export then import into a new file: the importer counts them again.
    out = tmp_path / "export.jsonl"
    mem = [sys.executable, "-m", "memcli"]
    subprocess.run(
        [*mem, "--db", str(store.path), "export", "--with-vectors", "-o", str(out)], check=True
    )
    other = tmp_path / "other.db"
    subprocess.run([*mem, "--db", str(other), "import", str(out)], check=True, capture_output=True)
    with Store(other) as imported:
        b = imported.banks.require_bank("default")
        again = imported.facts.facts_by_id(imported.facts.fact_ids_of_bank(b), b)
        assert sorted(f.tail_tokens for f in again.values()) == sorted(f.tail_tokens for f in facts)


def schema_5_copy(src: Path, dst: Path) -> None:
    """The file as schema 5 left it: no tail_tokens column (6), no facts_occurred_end
    index (7), no fact id high-water mark (8), no document sources (9), user_version 5."""
    import apsw

    conn = apsw.Connection(str(src))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    dst.write_bytes(src.read_bytes())
    conn = apsw.Connection(str(dst))
    conn.execute(
        "ALTER TABLE facts DROP COLUMN tail_tokens; DROP INDEX facts_occurred_end; "
        "DROP TRIGGER facts_id_high; DELETE FROM meta WHERE key = 'fact_id_high'; "
        "DROP INDEX documents_sync_root; ALTER TABLE documents DROP COLUMN sync_root; "
        "ALTER TABLE documents DROP COLUMN source_hash; DROP TABLE sentence_vec; "
        "PRAGMA user_version = 5"
    )
    conn.close()


def test_a_schema_5_store_is_upgraded_with_counts_and_read_only_opens_still_read_it(
    store, remember, tmp_path
):
    remember("Maya booked the Lisbon flat for May.", context="Maya")
    remember(
        "The dentist is on Tuesday at 3pm.", timestamp=datetime(2026, 3, 2) + timedelta(hours=9)
    )
    bank = store.banks.require_bank("default")
    want = {
        f.text: f.tail_tokens
        for f in store.facts.facts_by_id(store.facts.fact_ids_of_bank(bank)).values()
    }
    old = tmp_path / "old.db"
    schema_5_copy(store.path, old)
    with Store(old, create=False, readonly=True) as ro:
        assert ro.schema_version() == 5
        b = ro.banks.require_bank("default")
        read = ro.facts.facts_by_id(ro.facts.fact_ids_of_bank(b))
        assert {f.text: f.tail_tokens for f in read.values()} == dict.fromkeys(want)
        assert all(block_tokens(f) == tokens.count_tokens(memory_block(f)) for f in read.values())
    with Store(old, create=False) as upgraded:
        assert upgraded.schema_version() == SCHEMA_VERSION
        b = upgraded.banks.require_bank("default")
        read = upgraded.facts.facts_by_id(upgraded.facts.fact_ids_of_bank(b))
        assert {f.text: f.tail_tokens for f in read.values()} == want
