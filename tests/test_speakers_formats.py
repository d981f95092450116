"""Chat exports whose lines open with a time stamp (memcli/speakers.py): WhatsApp's two
layouts, bracketed ISO or clock times. The speaker is read after the stamp, the stamp is kept
as written in the memory's metadata ("said_at"), and a stamp that names a day unambiguously
becomes the time the turn was said, unless the caller gave one."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.retain import RetainItem
from memcli.speakers import read_speakers, split_label, split_stamp, stamp_times

runner = CliRunner()


@pytest.mark.parametrize(
    ("line", "stamp", "rest"),
    [
        ("[12/03/2023, 10:30:15] Alice: hi", "12/03/2023, 10:30:15", "Alice: hi"),
        ("12/03/2023, 10:30 - Alice: hi", "12/03/2023, 10:30", "Alice: hi"),
        ("3/12/23, 9:05\u202fPM - Bob: yo", "3/12/23, 9:05\u202fPM", "Bob: yo"),
        ("[2024-03-02 10:30] Alice: hi", "2024-03-02 10:30", "Alice: hi"),
        ("[2024-03-02T10:30:00] Alice: hi", "2024-03-02T10:30:00", "Alice: hi"),
        ("[10:30] Alice: hi", "10:30", "Alice: hi"),
        ("[1] Introduction: the plan", None, "[1] Introduction: the plan"),  # a footnote
        ("[TODO] Fix: the login", None, "[TODO] Fix: the login"),
        ("10:30 stand-up", None, "10:30 stand-up"),  # no separator: a note's own words
        ("[10:30]", None, "[10:30]"),  # nothing after it
    ],
)
def test_split_stamp(line: str, stamp, rest: str) -> None:
    assert split_stamp(line) == (stamp, rest)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # iOS group chats: a sender who is no contact
        ("~\u202fAlice: I moved.", ("Alice", "I moved.")),
        # Markdown bold is no label here: a note's "**Term:** ..." lines are no people
        ("**Alice:** I moved.", None),
        ("**Note:** buy milk", None),
    ],
)
def test_labels_of_chat_exports(text: str, expected) -> None:
    assert split_label(text) == expected


def test_a_line_of_many_spaces_is_read_at_once() -> None:
    """Text from a PDF or a fixed-width table: a regular expression that backtracks over
    the spaces took 72 s for this line (the whole retain waits on it)."""
    import signal

    def too_slow(*_):
        raise TimeoutError("split_label backtracks")

    signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(10)
    try:
        assert split_label("Total" + " " * 20000 + "42") is None
        assert split_stamp("[10:30]" + " " * 20000 + "x")[0] == "10:30"
    finally:
        signal.alarm(0)


@pytest.mark.parametrize(
    ("stamps", "expected"),
    [
        # a day above 12 first: day/month for every stamp of the text
        (["12/03/2023, 10:30", "13/03/2023, 08:00"], [(2023, 3, 12, 10, 30), (2023, 3, 13, 8, 0)]),
        # above 12 second: month/day; a 12-hour clock; a two-digit year
        (["3/12/23, 9:05 PM", "3/13/23, 12:10 AM"], [(2023, 3, 12, 21, 5), (2023, 3, 13, 0, 10)]),
        (["2024-03-02 10:30", "2024-03-02T11:00:05"], [(2024, 3, 2, 10, 30), (2024, 3, 2, 11, 0)]),
        # nothing above 12 anywhere: which is the day cannot be told, so no time is read
        (["01/02/2023, 10:30", "02/03/2023, 11:00"], [None, None]),
        (["10:30", "11:00"], [None, None]),  # a clock alone names no day
        (["31/02/2023, 10:30"], [None]),  # no such day
        # both numbers above 12: no day either way, and no say in the order of the others
        (["13/14/2023, 10:30", "13/03/2023, 10:31"], [None, (2023, 3, 13, 10, 31)]),
    ],
)
def test_stamp_times(stamps, expected, monkeypatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    got = stamp_times(stamps)
    assert [g and (g.year, g.month, g.day, g.hour, g.minute) for g in got] == expected


WHATSAPP = """[12/03/2023, 10:30:15] Alice: I moved to Lisbon last spring.
[12/03/2023, 10:31:02] Bob: Nice! Do you like it there?
[13/03/2023, 08:00:40] Alice: I love the tiles
and the light.
[13/03/2023, 08:02:11] Bob: I'm learning Portuguese for my trip in May."""


def test_a_pasted_whatsapp_chat_becomes_turns_said_when_stamped(monkeypatch) -> None:
    monkeypatch.setenv("TZ", "Europe/Lisbon")  # the stamps are the phone's wall clock
    (item,) = [RetainItem(text=WHATSAPP)]
    read, count = read_speakers([item])
    assert count == 4
    assert [(i.context, i.text, i.metadata.get("said_at")) for i in read] == [
        ("Alice", "I moved to Lisbon last spring.", "12/03/2023, 10:30:15"),
        ("Bob", "Nice! Do you like it there?", "12/03/2023, 10:31:02"),
        ("Alice", "I love the tiles\nand the light.", "13/03/2023, 08:00:40"),
        ("Bob", "I'm learning Portuguese for my trip in May.", "13/03/2023, 08:02:11"),
    ]
    # Lisbon is UTC+0 in March (summer time starts on the 26th)
    assert [i.timestamp for i in read] == [
        datetime(2023, 3, 12, 10, 30, 15),
        datetime(2023, 3, 12, 10, 31, 2),
        datetime(2023, 3, 13, 8, 0, 40),
        datetime(2023, 3, 13, 8, 2, 11),
    ]
    assert item.text == WHATSAPP and item.metadata == {}  # the caller's item is not changed
    # A time the caller gives (--at, a JSONL "timestamp") comes first; the stamp stays.
    told = datetime(2026, 5, 3)
    read, _ = read_speakers([RetainItem(text=WHATSAPP, timestamp=told)])
    assert {i.timestamp for i in read} == {told} and read[0].metadata["said_at"]


def test_an_android_export_with_a_system_line_and_local_time(monkeypatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    text = (
        "3/12/23, 9:05 PM - Messages and calls are end-to-end encrypted.\n"
        "3/12/23, 9:06 PM - Ana: Dinner on Friday?\n"
        "3/13/23, 7:15 AM - Ben: Sure, the Thai place.\n"
        "3/13/23, 7:16 AM - Ana: Booked it.\n"
        "3/13/23, 7:20 AM - Ben: Great, see you there."
    )
    read, count = read_speakers([RetainItem(text=text)])
    assert count == 4
    assert [(i.context, i.text) for i in read] == [
        (None, "3/12/23, 9:05 PM - Messages and calls are end-to-end encrypted."),
        ("Ana", "Dinner on Friday?"),
        ("Ben", "Sure, the Thai place."),
        ("Ana", "Booked it."),
        ("Ben", "Great, see you there."),
    ]
    # New York is UTC-4 from March 12, 2023 (daylight time began that morning)
    assert read[1].timestamp == datetime(2023, 3, 13, 1, 6)
    assert read[2].timestamp == datetime(2023, 3, 13, 11, 15)


def test_stamps_that_name_no_day_keep_the_items_time() -> None:
    when = datetime(2026, 5, 3, 9, 0)
    ambiguous = "\n".join(
        f"[0{n}/02/2023, 10:3{n}] {who}: line {n}"
        for n, who in enumerate(["Alice", "Bob", "Alice", "Bob"], start=1)
    )
    clock = "[10:30] Alice: hi\n[10:31] Bob: hello\n[10:32] Alice: bye\n[10:33] Bob: ciao"
    for text in (ambiguous, clock):
        read, count = read_speakers([RetainItem(text=text, timestamp=when)])
        assert count == 4
        assert all(i.timestamp == when for i in read)
        assert all(i.metadata["said_at"] for i in read)


def test_stamped_lines_given_as_items_are_read_the_same(monkeypatch) -> None:
    """One message an item (a JSONL of exported lines): the call's stamps decide the order
    of day and month together."""
    monkeypatch.setenv("TZ", "UTC")
    given = [
        RetainItem(text=line) for line in WHATSAPP.replace("tiles\nand", "tiles and").split("\n")
    ]
    read, count = read_speakers(given)
    assert count == 4
    assert [(i.context, i.timestamp) for i in read] == [
        ("Alice", datetime(2023, 3, 12, 10, 30, 15)),
        ("Bob", datetime(2023, 3, 12, 10, 31, 2)),
        ("Alice", datetime(2023, 3, 13, 8, 0, 40)),
        ("Bob", datetime(2023, 3, 13, 8, 2, 11)),
    ]


def test_stamped_lines_in_a_plain_transcript_stay_in_their_turn() -> None:
    """Only in a stamped chat is a stamped line with no speaker a message of its own."""
    text = (
        "Alice: Here's tomorrow's plan:\n[09:00] standup\n[10:30] budget review\n"
        "Bob: Sounds good.\nAlice: Don't be late.\nBob: I won't."
    )
    read, count = read_speakers([RetainItem(text=text)])
    assert count == 4
    assert read[0].context == "Alice"
    assert read[0].text == "Here's tomorrow's plan:\n[09:00] standup\n[10:30] budget review"


def test_an_ios_export_with_marks_and_a_sender_who_is_no_contact(monkeypatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    text = (
        "[12/03/2023, 10:30:15] Alice: Look at this view!\n"
        "\u200e[12/03/2023, 10:30:20] Alice: \u200e<attached: 00000012-PHOTO.jpg>\n"
        "[12/03/2023, 10:31:02] ~\u202fBob: Wow, where is that?\n"
        "[13/03/2023, 08:00:40] Alice: Sintra, near Lisbon.\n"
        "[13/03/2023, 08:02:11] ~\u202fBob: Adding it to my list."
    )
    read, count = read_speakers([RetainItem(text=text)])
    assert count == 5
    assert [i.context for i in read] == ["Alice", "Alice", "Bob", "Alice", "Bob"]
    assert read[1].text == "\u200e<attached: 00000012-PHOTO.jpg>"
    assert read[1].timestamp == datetime(2023, 3, 12, 10, 30, 20)


def test_a_whatsapp_chat_through_the_cli_answers_a_question_about_its_day(tmp_path) -> None:
    """Pasted on stdin: each message is a memory of its speaker, said on its own day, and
    the stamp is kept; a question about that day finds that day's messages."""
    db = tmp_path / "m.db"
    env = {"TZ": "UTC"}
    r = runner.invoke(app, ["--db", str(db), "retain", "-"], input=WHATSAPP, env=env)
    assert r.exit_code == 0, r.output
    rows = json.loads(runner.invoke(app, ["--db", str(db), "list", "--format", "json"]).stdout)
    said = {(m["context"], m["mentioned_at"][:10], m["metadata"]["said_at"]) for m in rows}
    assert ("Alice", "2023-03-12", "12/03/2023, 10:30:15") in said
    assert ("Bob", "2023-03-13", "13/03/2023, 08:02:11") in said
    # the same export pasted again: every message is a duplicate (its stamps are its times)
    again = ["--db", str(db), "retain", "-"]
    r = runner.invoke(app, again, input=WHATSAPP, env=env)
    assert r.exit_code == 0, r.output
    assert (
        len(json.loads(runner.invoke(app, ["--db", str(db), "list", "--format", "json"]).stdout))
        == 4
    )
    r = runner.invoke(
        app,
        ["--db", str(db), "recall", "--format", "json", "What did Alice say on March 13, 2023?"],
        env=env,
    )
    top = json.loads(r.stdout)["results"][0]
    assert (top["context"], top["text"]) == ("Alice", "I love the tiles and the light.")
    assert top["mentioned_at"].startswith("2023-03-13")
