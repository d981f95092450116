"""Retain reads who said it from a transcript's "Name: text" lines (memcli/speakers.py), and
recall then ranks such a transcript as it ranks the same talk given with its speakers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.retain import RetainItem
from memcli.speakers import read_speakers, split_label, transcript_turns
from tests.test_named_query import TALK  # one talk, where Tim's name misled the vector

runner = CliRunner()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Caroline: Hey Mel!", ("Caroline", "Hey Mel!")),
        ("Jean-Luc Picard: Engage.", ("Jean-Luc Picard", "Engage.")),
        ("Dr. Who: hello", ("Dr. Who", "hello")),
        ("O'Neil :  fine", ("O'Neil", "fine")),
        ("王磊：我今天很累", ("王磊", "我今天很累")),
        ("Ärzte: ja", ("Ärzte", "ja")),
        ("the plan: go", None),  # not capitalised
        ("Mary Ann Lee Smith: hi", None),  # more than three words
        ("10:30 stand-up", None),
        ("https://example.com", None),
        ("R2D2: beep", None),  # digits are no name
        ("Alice:", None),  # nothing said
        ("Alice:   ", None),
        ("No colon here", None),
        ("ERROR: disk full", None),  # all capitals: a marker, not a name
        ("Q: why?", None),
        ("Monday: dentist at 3pm", None),  # a time
        ("Yesterday: rain", None),
        ("Bob: \u200b\u200b", None),  # nothing visible said
        ("Date: Mon Mar 4 2024", None),  # an ordinary word: a field, not a name
        ("Answer: 42", None),
        ("You: hi", None),
        ("第一步先打开电源然后等待十秒钟：好", None),  # a CJK phrase, longer than a name
    ],
)
def test_split_label(text: str, expected) -> None:
    assert split_label(text) == expected


def items(*texts: str, **fields) -> list[RetainItem]:
    return [RetainItem(text=t, **fields) for t in texts]


DIALOGUE = (
    "Alice: I moved to Lisbon last spring.",
    "Bob: Nice! Do you like it there?",
    "Alice: I love the tiles and the light.",
    "Bob: I'm learning Portuguese for my trip in May.",
)


def test_a_dialogue_gets_its_speakers() -> None:
    given = items(*DIALOGUE)
    read, count = read_speakers(given)
    assert count == 4
    assert [(i.context, i.text) for i in given] == [(None, t) for t in DIALOGUE]  # not changed
    assert [(i.context, i.text) for i in read] == [
        ("Alice", "I moved to Lisbon last spring."),
        ("Bob", "Nice! Do you like it there?"),
        ("Alice", "I love the tiles and the light."),
        ("Bob", "I'm learning Portuguese for my trip in May."),
    ]


@pytest.mark.parametrize(
    "given",
    [
        # one label, however often: a heading, not a dialogue
        items("Note: buy milk", "Note: call mum", "Note: pay rent"),
        # a story's repeated section headings (the same two lines twice, as in a haystack)
        items(*["Night: MK is cold."] * 2, *["Morning: MK wakes."] * 2),
        # labels on a few lines of many: no transcript
        items(
            "Alice: hi",
            "Bob: hello",
            "Alice: bye",
            "Bob: see you",
            *[f"plain line {n}" for n in range(6)],
        ),
        # items with a speaker of their own, or no conversation turns (a note's paragraphs)
        items(*DIALOGUE, context="Maya"),
        items(*DIALOGUE, lead_in=False),
        items(*DIALOGUE, verbatim=True),
        # a plan by weekday, a log by level: times and markers, not names
        items("Monday: dentist at 3pm", "Tuesday: gym", "Monday: call mum", "Tuesday: rest"),
        items("ERROR: disk full", "INFO: retrying", "ERROR: gave up", "INFO: done"),
        # a git log: "Author:" opens lines, "Date:" is an ordinary word, not a second name
        items(
            *["commit 4d5e6f", "Author: Alice Smith", "Date: Mon Mar 4 2024", "Fix the login"],
            *["commit 7a8b9c", "Author: Bob Jones", "Date: Tue Mar 5 2024", "Add a test"],
        ),
        # an FAQ: questions and answers are no people
        items("Question: How?", "Answer: Like so.", "Question: Why?", "Answer: Because."),
        # records: three fields always in the same order (a slide outline), not three people
        items(
            *["Title: Our mission", "Image Concept: a map", "Details: who we are"],
            *["Title: The market", "Image Concept: a chart", "Details: how big it is"],
        ),
    ],
)
def test_no_speaker_where_nothing_shows_one(given: list[RetainItem]) -> None:
    read, count = read_speakers(given)
    assert count == 0
    assert [(i.context, i.text) for i in read] == [(i.context, i.text) for i in given]


def mem(db: Path, *args: str):
    return runner.invoke(app, ["--db", str(db), *args])


def test_a_transcript_through_retain_jsonl_ranks_as_the_same_talk_with_speakers(tmp_path):
    """The same talk retained twice by `mem retain --jsonl`: once with a context field, once
    as "Name: text" lines. The stores hold the same memories and recall ranks them alike."""
    with_context = tmp_path / "context.jsonl"
    with_context.write_text(
        "".join(json.dumps({"text": t, "context": who}) + "\n" for who, t in TALK)
    )
    in_text = tmp_path / "text.jsonl"
    in_text.write_text("".join(json.dumps({"text": f"{who}: {t}"}) + "\n" for who, t in TALK))
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    r = mem(a, "retain", "--jsonl", str(with_context))
    assert r.exit_code == 0, r.output
    r = mem(b, "retain", "--jsonl", str(in_text))
    assert r.exit_code == 0, r.output
    assert "speakers read from the text of 6 items" in r.output
    for db in (a, b):
        r = mem(db, "list", "--format", "json")
        assert r.exit_code == 0, r.output
    lists = [json.loads(mem(db, "list", "--format", "json").stdout) for db in (a, b)]
    seen = [sorted((m["context"], m["text"]) for m in rows) for rows in lists]
    assert seen[0] == seen[1] == sorted(TALK)
    answers = []
    for db in (a, b):
        r = mem(db, "recall", "--format", "json", "Which language is Tim learning?")
        assert r.exit_code == 0, r.output
        out = json.loads(r.stdout)
        answers.append([(m["context"], m["text"]) for m in out["results"]])
    assert answers[0] == answers[1]
    assert answers[1][0] == TALK[0]


CHAT = """Chat with Bob, 3 May
Alice: I moved to Lisbon last spring.
Bob: Nice! Do you like it there?
Alice: I love the tiles
and the light.

Bob: I'm learning Portuguese for my trip in May.
"""


def test_two_peoples_words_in_one_item_are_nobody_s() -> None:
    """In a dialogue, an item that also holds someone else's line keeps its label."""
    given = items(*DIALOGUE, "Alice: I found a flat.\nBob: Where is it?")
    read, count = read_speakers(given)
    assert count == 4
    assert (read[-1].context, read[-1].text) == (None, given[-1].text)


def turns(text: str) -> list[tuple[str | None, str]] | None:
    found = transcript_turns(text)
    return None if found is None else [(t.speaker, t.text) for t in found]


def test_transcript_turns() -> None:
    assert turns(CHAT) == [
        (None, "Chat with Bob, 3 May"),
        ("Alice", "I moved to Lisbon last spring."),
        ("Bob", "Nice! Do you like it there?"),
        ("Alice", "I love the tiles\nand the light."),
        ("Bob", "I'm learning Portuguese for my trip in May."),
    ]
    # a heading repeated, a note with one labelled line, a single line: no transcript
    assert turns("Note: a\nNote: b\nNote: c") is None
    assert turns("Shopping\nNote: buy milk\neggs\nbread") is None
    assert turns("Alice: hi") is None
    # in a dialogue, one who says a single line is a speaker too; "Note:" stays a line of
    # its own, as written (an ordinary word is no name)
    assert turns("Alice: a\nBob: b\nCarol: c\nNote: n\nAlice: d\nBob: e") == [
        ("Alice", "a"),
        ("Bob", "b"),
        ("Carol", "c\nNote: n"),
        ("Alice", "d"),
        ("Bob", "e"),
    ]


def test_a_transcript_given_as_one_text_becomes_its_turns(tmp_path) -> None:
    """Pasted on stdin (`mem retain -`), a chat log is one turn a memory, each its speaker's;
    a file given with --file is a note (its name the context) and stays whole."""
    db = tmp_path / "m.db"
    r = runner.invoke(app, ["--db", str(db), "retain", "--at", "2026-05-03", "-"], input=CHAT)
    assert r.exit_code == 0, r.output
    assert "5 items, 5 facts stored, speakers read from the text of 4 items" in r.output
    rows = json.loads(mem(db, "list", "--format", "json").stdout)
    assert sorted((m["context"] or "", m["text"]) for m in rows) == sorted(
        [
            ("", "Chat with Bob, 3 May"),
            ("Alice", "I moved to Lisbon last spring."),
            ("Bob", "Nice! Do you like it there?"),
            ("Alice", "I love the tiles and the light."),  # a fact's spaces, as ever
            ("Bob", "I'm learning Portuguese for my trip in May."),
        ]
    )
    r = mem(db, "recall", "--format", "json", "What is Bob learning?")
    top = json.loads(r.stdout)["results"][0]
    assert (top["context"], top["text"]) == ("Bob", "I'm learning Portuguese for my trip in May.")
    # the same text said at the same time again: every turn is a duplicate
    r = runner.invoke(app, ["--db", str(db), "retain", "--at", "2026-05-03", "-"], input=CHAT)
    assert r.exit_code == 0, r.output
    assert len(json.loads(mem(db, "list", "--format", "json").stdout)) == 5
    chat = tmp_path / "chat.txt"
    chat.write_text(CHAT)
    other = tmp_path / "o.db"
    r = mem(other, "retain", "--file", str(chat))
    assert r.exit_code == 0, r.output
    assert "speaker" not in r.output
    (row,) = json.loads(mem(other, "list", "--format", "json").stdout)
    assert row["context"] == "chat"


def test_no_speakers_keeps_a_transcript_as_written_and_a_correction_is_one_fact(tmp_path):
    db = tmp_path / "m.db"
    r = runner.invoke(
        app, ["--db", str(db), "retain", "--at", "2026-05-03", "--no-speakers", "-"], input=CHAT
    )
    assert r.exit_code == 0, r.output
    assert "speakers read" not in r.output
    (row,) = json.loads(mem(db, "list", "--format", "json").stdout)
    assert row["context"] is None and row["text"].startswith("Chat with Bob, 3 May Alice: I moved")
    # a correction is one item: a chat log given as one is not split into several facts
    r = runner.invoke(
        app, ["--db", str(db), "retain", "--supersedes", str(row["id"]), "-"], input=CHAT
    )
    assert r.exit_code == 0, r.output
    rows = json.loads(mem(db, "list", "--format", "json").stdout)
    assert len(rows) == 1 and rows[0]["context"] is None and rows[0]["id"] != row["id"]


def test_progress_counts_the_callers_items_when_chat_logs_are_split(tmp_path, embedder):
    """A progress bar is sized by the items given; chat logs split into turns still end it
    at its end, never past it."""
    from memcli.retain import Retainer
    from memcli.settings import RetainSettings
    from memcli.store import Store

    logs = [RetainItem(text=CHAT.replace("May.", f"May, take {n}.")) for n in range(7)]
    steps: list[int] = []
    with Store(tmp_path / "m.db") as store:
        retainer = Retainer(store, "default", embedder, settings=RetainSettings(batch_items=4))
        summary = retainer.retain(logs, steps.append)
    assert summary.items == 7 * 5 and summary.speakers_from_text == 7 * 4
    assert sum(steps) == len(logs) and all(n >= 0 for n in steps) and len(steps) > 1
