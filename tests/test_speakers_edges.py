"""Edge cases of reading speakers from "Name: text" lines (memcli/speakers.py) through every
way in: the CLI, the Python API, MCP, sync and import. The first group are the bugs a review
of the first version found (each failed then; the docstrings say how it went wrong); the
others pin what worked from the start."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path

from mcp import Client
from typer.testing import CliRunner

from memcli.cli import app
from memcli.memory import Memory
from memcli.retain import Retainer, RetainItem
from memcli.speakers import split_label
from memcli.store import Store
from tests.test_mcp import server_params

runner = CliRunner()

DIALOGUE = [
    "Alice: I moved to Lisbon last spring.",
    "Bob: Nice! Do you like it there?",
    "Alice: I love the tiles and the light.",
    "Bob: I'm learning Portuguese for my trip in May.",
]


def mem(db: Path, *args: str, stdin: str | None = None):
    return runner.invoke(app, ["--db", str(db), *args], input=stdin)


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def dated(texts: list[str], **fields) -> list[dict]:
    return [
        {"text": t, "timestamp": f"2024-05-01T10:{n:02d}:00", **fields} for n, t in enumerate(texts)
    ]


def facts(db: Path) -> list[tuple[str | None, str]]:
    r = mem(db, "list", "--format", "json")
    assert r.exit_code == 0, r.output
    return sorted(((m["context"], m["text"]) for m in json.loads(r.stdout)), key=str)


# -- bugs the review found, fixed ----------------------------------------------------------


def test_a_jsonl_with_contexts_on_some_lines_retained_twice_stores_nothing_new(tmp_path):
    """Run 1: "Bob" is not yet a context in the bank when the labels are judged (the line
    with "context": "Bob" is written in the same call), so "Bob: ..." stays text. Run 2: Bob
    is known, the line is split, its hash differs, and it is stored a second time."""
    rows = [
        {"id": "n1", "text": "I moved to Lisbon last spring.", "context": "Bob"},
        {"id": "n2", "text": "Bob: I love the tiles and the light."},
    ]
    path = jsonl(tmp_path / "mixed.jsonl", rows)
    db = tmp_path / "m.db"
    assert mem(db, "retain", "--jsonl", str(path)).exit_code == 0
    first = facts(db)
    r = mem(db, "retain", "--jsonl", str(path))
    assert r.exit_code == 0, r.output
    assert "2 duplicates skipped" in r.output
    assert facts(db) == first


def test_the_same_line_retained_again_after_its_speaker_became_known_is_a_duplicate(
    tmp_path, embedder
):
    """An agent's line retained before the dialogue (no speaker known: kept as text), then
    the same line, same time, after it: stored twice, once per reading."""
    when = datetime(2024, 5, 1, 10, 30)
    line = "Alice: and I found a flat in Alfama."
    with Store(tmp_path / "m.db") as store:
        Retainer(store, "default", embedder).retain([RetainItem(text=line, timestamp=when)])
        Retainer(store, "default", embedder).retain(
            [
                RetainItem(text=t, timestamp=datetime(2024, 5, 1, 10, n))
                for n, t in enumerate(DIALOGUE)
            ]
        )
        again = Retainer(store, "default", embedder).retain([RetainItem(text=line, timestamp=when)])
        assert (again.facts, again.duplicates) == (0, 1)


def test_a_multi_line_transcript_in_one_text_is_not_given_to_its_first_speaker(tmp_path):
    """`mem retain -` (one item) of a transcript whose first speaker the bank knows: the whole
    text, Bob's line too, becomes Alice's."""
    db = tmp_path / "m.db"
    assert (
        mem(db, "retain", "--jsonl", str(jsonl(tmp_path / "d.jsonl", dated(DIALOGUE)))).exit_code
        == 0
    )
    talk = (
        "Alice: I found a flat in Alfama.\n"
        "Bob: Which street is it on?\n"
        "Alice: Rua da Regueira, near the castle.\n"
    )
    r = mem(db, "retain", "-", stdin=talk)
    assert r.exit_code == 0, r.output
    new = [(who, text) for who, text in facts(db) if "Which street" in text]
    assert new and all(who != "Alice" for who, _ in new), new


def test_the_mcp_retain_tool_does_not_give_a_whole_transcript_to_one_speaker(tmp_path):
    db = tmp_path / "m.db"
    assert (
        mem(db, "retain", "--jsonl", str(jsonl(tmp_path / "d.jsonl", dated(DIALOGUE)))).exit_code
        == 0
    )

    async def session():
        async with Client(server_params(db)) as client:
            return await client.call_tool(
                "retain", {"text": "Alice: I found a flat.\nBob: Where is it?"}
            )

    result = asyncio.run(asyncio.wait_for(session(), timeout=120))
    assert not result.is_error
    new = [(who, text) for who, text in facts(db) if "Where is it" in text]
    assert new and all(who != "Alice" for who, _ in new), new


def test_weekday_labels_of_a_plan_keep_their_dates(tmp_path):
    """A plan of "Monday: ..." lines reads as a dialogue of Monday and Tuesday: the day moves
    into the context and the fact loses the date it talks about."""
    plan = [
        "Monday: dentist at 3pm",
        "Tuesday: call the bank about the loan",
        "Monday: gym with Carla after work",
        "Tuesday: pick up the bike",
    ]
    db = tmp_path / "m.db"
    r = mem(db, "retain", "--jsonl", str(jsonl(tmp_path / "plan.jsonl", dated(plan))))
    assert r.exit_code == 0, r.output
    rows = json.loads(mem(db, "list", "--format", "json").stdout)
    assert len(rows) == 4
    assert all(m["occurred_start"] is not None for m in rows), [
        (m["context"], m["text"], m["occurred_start"]) for m in rows
    ]


def test_a_label_before_only_invisible_characters_is_no_speaker_line(tmp_path):
    """check_item refuses a text of only invisible characters; splitting the label off after
    it stored one ("Bob: " + zero-width spaces) as a fact of no visible text."""
    assert split_label("Bob: \u200b\u200b") is None
    db = tmp_path / "m.db"
    rows = dated([*DIALOGUE, "Bob: \u200b\u200b"])
    assert mem(db, "retain", "--jsonl", str(jsonl(tmp_path / "z.jsonl", rows))).exit_code == 0
    assert all(text.strip("\u200b") for _, text in facts(db))


def test_retain_json_summary_says_how_many_speakers_were_read(tmp_path):
    """The text line said "speakers read from the text of 4 items", but --json
    (results.RetainSummary, which lacked the field) dropped it."""
    db = tmp_path / "m.db"
    path = jsonl(tmp_path / "d.jsonl", dated(DIALOGUE))
    r = mem(db, "retain", "--jsonl", str(path), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["summary"].get("speakers_from_text") == 4


def test_a_note_title_in_the_bank_does_not_make_note_lines_speaker_lines(tmp_path):
    """README: '"Note: ..." on its own stays text'. A synced note titled "Note" makes
    "note" a context, so every later "Note: ..." loses its label to a speaker "Note"."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "note.md").write_text("# Note\n\nThe boiler code is 4411.\n", encoding="utf-8")
    db = tmp_path / "m.db"
    assert mem(db, "sync", str(notes)).exit_code == 0
    r = mem(db, "retain", "Note: the wifi password changed")
    assert r.exit_code == 0, r.output
    assert (None, "Note: the wifi password changed") in facts(db)


# -- what works (pinned) ----------------------------------------------------------------------


def test_a_transcript_retained_twice_is_all_duplicates(tmp_path):
    db = tmp_path / "m.db"
    path = jsonl(tmp_path / "d.jsonl", dated(DIALOGUE))
    assert mem(db, "retain", "--jsonl", str(path)).exit_code == 0
    first = facts(db)
    assert first == sorted([tuple(line.split(": ", 1)) for line in DIALOGUE], key=str)
    r = mem(db, "retain", "--jsonl", str(path))
    assert r.exit_code == 0, r.output
    assert "0 facts stored, 4 duplicates skipped" in r.output
    assert facts(db) == first


def test_items_with_a_context_or_from_notes_keep_their_labels(tmp_path):
    db = tmp_path / "m.db"
    given = dated(DIALOGUE, context="Maya")
    assert mem(db, "retain", "--jsonl", str(jsonl(tmp_path / "c.jsonl", given))).exit_code == 0
    assert facts(db) == sorted([("Maya", t) for t in DIALOGUE], key=str)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "talk.md").write_text("\n\n".join(DIALOGUE) + "\n", encoding="utf-8")
    other = tmp_path / "n.db"
    r = mem(other, "sync", str(notes))
    assert r.exit_code == 0, r.output
    assert {text for _, text in facts(other)} == set(DIALOGUE)


def test_the_python_api_reads_speakers_and_leaves_a_given_context(tmp_path):
    with Memory(tmp_path / "m.db") as memory:
        done = memory.retain(items=dated(DIALOGUE))
        assert done.summary.facts == 4
        memory.retain("Alice: my sister visits in June.", context="Carol")
        rows = {(f.context, f.text) for f in memory.list()}
    assert ("Alice", "I moved to Lisbon last spring.") in rows
    assert ("Carol", "Alice: my sister visits in June.") in rows


def test_a_transcript_document_replaced_and_appended_keeps_its_speakers(tmp_path):
    db = tmp_path / "m.db"
    path = jsonl(tmp_path / "d.jsonl", dated(DIALOGUE, document_id="chat"))
    assert mem(db, "retain", "--jsonl", str(path)).exit_code == 0
    changed = [*DIALOGUE[:3], "Bob: I'm learning Portuguese for my trip in June."]
    path = jsonl(tmp_path / "d2.jsonl", dated(changed, document_id="chat"))
    r = mem(db, "retain", "--jsonl", str(path))
    assert r.exit_code == 0, r.output
    assert "1 document replaced" in r.output
    one = jsonl(
        tmp_path / "one.jsonl",
        [
            {
                "text": "Alice: See you in June!",
                "document_id": "chat",
                "timestamp": "2024-05-01T11:00:00",
            }
        ],
    )
    r = mem(db, "retain", "--jsonl", str(one), "--append")
    assert r.exit_code == 0, r.output
    # One line alone shows no dialogue: only the input decides, never the bank, so it keeps
    # its label as text (the caller gives its context when it knows it).
    assert facts(db) == sorted(
        [*(tuple(line.split(": ", 1)) for line in changed), (None, "Alice: See you in June!")],
        key=str,
    )


def test_export_then_import_keeps_the_speakers_and_texts(tmp_path):
    db, copy = tmp_path / "m.db", tmp_path / "copy.db"
    assert (
        mem(db, "retain", "--jsonl", str(jsonl(tmp_path / "d.jsonl", dated(DIALOGUE)))).exit_code
        == 0
    )
    r = mem(db, "export")
    assert r.exit_code == 0, r.output
    (tmp_path / "bank.export").write_text(r.stdout, encoding="utf-8")
    r = mem(copy, "import", str(tmp_path / "bank.export"))
    assert r.exit_code == 0, r.output
    assert facts(copy) == facts(db)
