"""Recall output a language model reads right: the reference time first, each memory's said
date and the date it talks about kept apart, no decoration off a terminal, JSON unchanged."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from typer.testing import CliRunner

from memcli import render
from memcli.cli import app
from memcli.recall import RecallOptions, recall
from memcli.retain import RetainItem

runner = CliRunner()


def mem(db, *args: str, env: dict | None = None):
    return runner.invoke(app, ["--db", str(db), *args], env=env)


def retain(db, at: str, text: str, context: str = "Maya") -> None:
    r = mem(db, "retain", "--at", at, "--context", context, text)
    assert r.exit_code == 0, r.stderr


def test_a_plan_said_in_february_about_november_reads_as_a_plan(db_path):
    retain(db_path, "2026-02-10", "We will book the flights to Lisbon in November 2026.")
    retain(db_path, "2026-05-20", "Back from Portugal yesterday, the trip was worth it.")
    # --min-score 0: both memories, the second below the relevance floor for this query.
    r = mem(db_path, "recall", "Lisbon flights", "--now", "2026-11-20", "--min-score", "0")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith('Memories relevant to "Lisbon flights", as of 2026-11-20')
    assert lines[1] == ""
    plan = next(x for x in lines if "book the flights" in x)
    assert plan.startswith("[said 2026-02-10, about 2026-11 (future when said)] Maya: ")
    # Something said about the day before it was said: both dates, and no "future".
    back = next(x for x in lines if "Back from Portugal" in x)
    assert back.startswith("[said 2026-05-20, about 2026-05-19] Maya: ")


def test_a_memory_about_the_day_it_was_said_shows_one_date(db_path):
    retain(db_path, "2026-03-21", "Decided to book the Lisbon trip today.")
    r = mem(db_path, "recall", "Lisbon trip", "--now", "2026-11-20")
    assert r.stdout.splitlines()[2] == "[2026-03-21] Maya: Decided to book the Lisbon trip today."
    assert "said:" not in r.stdout.splitlines()[0]  # no legend when no memory needs it


def test_no_decoration_when_piped_and_json_keeps_both_dates(db_path):
    retain(db_path, "2026-02-10", "We will book the flights to Lisbon in November 2026.")
    r = mem(db_path, "recall", "Lisbon", "--now", "2026-11-20")
    assert "\x1b[" not in r.stdout
    assert not any(line.lstrip().startswith("1.") for line in r.stdout.splitlines())
    obj = json.loads(mem(db_path, "recall", "Lisbon", "--format", "json").stdout)
    (hit,) = obj["results"]
    assert hit["mentioned_at"] == "2026-02-10T00:00:00Z"
    assert hit["occurred_start"].startswith("2026-11-01")
    assert "Memories relevant" not in json.dumps(obj)


def test_terminal_decoration_respects_no_color_and_dumb_terminals(store, remember, monkeypatch):
    remember("The boiler was serviced by Anton.", timestamp=datetime(2026, 4, 2))
    result = recall(
        store,
        "default",
        "boiler",
        RecallOptions(now=datetime(2026, 11, 20), arms=("keyword",)),
        embedder=None,
    )
    assert result.results

    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert render.use_color(Tty())
    colored = render.to_text(result, decorate=True, color=True)
    assert "\x1b[2m 1. (" in colored
    monkeypatch.setenv("NO_COLOR", "1")
    assert not render.use_color(Tty())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not render.use_color(Tty())
    plain = render.to_text(result, decorate=True, color=False)
    assert "\x1b[" not in plain and " 1. (" in plain
    assert "The boiler was serviced by Anton." in plain


def test_retain_item_dates_come_through_unchanged(store, remember):
    remember([RetainItem(text="Moving to Lisbon in 2027.", timestamp=datetime(2026, 1, 5))])
    result = recall(
        store,
        "default",
        "Lisbon",
        RecallOptions(now=datetime(2026, 11, 20), arms=("keyword",)),
        embedder=None,
    )
    assert (
        render.to_text(result)
        .splitlines()[2]
        .startswith("[said 2026-01-05, about 2027 (future when said)] ")
    )


@pytest.mark.parametrize(
    "obj",
    [
        {"text": 'Zoë said 你好 "hi"\n', "score": 0.30000000000000004, "ranks": [1, None]},
        {"id": 2**63 - 1, "small": -(2**63), "nested": {"a": [1.5, True, False, None]}},
        {"huge": 2**70},  # past 64 bits: json writes it, orjson cannot
        {"text": "half a pair \ud800 stored before input was checked"},
        {1: "an int key", "two": 2},
    ],
    ids=["unicode", "int64", "huge-int", "surrogate", "int-key"],
)
def test_dumps_is_one_line_that_reads_back_as_json_would(obj):
    line = render.dumps(obj)
    assert "\n" not in line
    # compact whichever library wrote it (review: the json fallback kept its spaces)
    assert '": ' not in line and '", "' not in line
    expected = json.loads(json.dumps(obj, ensure_ascii=False))
    assert json.loads(line) == expected
    if "text" in obj and "\ud800" not in obj["text"]:
        assert obj["text"] in json.loads(line)["text"] and "你好" in line  # not escaped to ASCII
