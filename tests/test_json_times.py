"""Every time the JSON contract carries has an explicit offset (issue 33, finding 4).

`"mentioned_at": "2026-03-10T04:00:00"` for a local midnight in New York read, to jq and to
an agent, as four in the morning local time. Instants are written in UTC with `Z`; the
calendar times a memory talks about keep their day, with the local zone's offset. The export
file keeps the store's naive form (a storage format, compared byte for byte on round trip).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from memcli.cli import app

OFFSET = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)$")
TIME_KEYS = {
    "mentioned_at",
    "occurred_start",
    "occurred_end",
    "valid_from",
    "invalid_at",
    "created_at",
    "now",
    "at",
    "first",
    "last",
    "start",
    "end",
}


def times_in(obj: Any, path: str = "") -> list[tuple[str, str]]:
    """Every (where, value) of a time key in a JSON value."""
    found = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in TIME_KEYS and isinstance(value, str):
                found.append((f"{path}.{key}", value))
            found += times_in(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            found += times_in(value, f"{path}[{i}]")
    return found


def mem(db: Path, *args: str) -> Any:
    r = CliRunner().invoke(app, ["--db", str(db), *args])
    assert r.exit_code == 0, r.stdout + r.stderr
    return r


def test_json_times_carry_an_offset_in_every_command(db_path, tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    said = mem(
        db_path,
        "retain",
        "--json",
        "--at",
        "2026-03-10",
        "--context",
        "Maya",
        "Maya will fly to Lisbon on May 9, 2026.",
    )
    stored = json.loads(said.stdout)["stored"][0]
    # A local midnight in New York (EDT from March 8) is 04:00 UTC, and says so.
    assert stored["mentioned_at"] == "2026-03-10T04:00:00Z"
    # The day the memory talks about stays May 9, with New York's offset on that day.
    assert stored["occurred_start"] == "2026-05-09T00:00:00-04:00"
    correct = mem(
        db_path, "correct", str(stored["id"]), "Maya will fly on May 10.", "--format", "json"
    )
    outputs = {
        "retain": json.loads(said.stdout),
        "correct": json.loads(correct.stdout),
        "recall": json.loads(
            mem(db_path, "recall", "Lisbon flight in May", "--format", "json", "--trace").stdout
        ),
        "list": json.loads(mem(db_path, "list", "--include-invalid", "--format", "json").stdout),
        "show": json.loads(mem(db_path, "show", str(stored["id"]), "--format", "json").stdout),
        "banks": json.loads(mem(db_path, "banks", "--format", "json").stdout),
        "stats": json.loads(mem(db_path, "stats", "--json").stdout),
        "forget": json.loads(
            mem(db_path, "forget", "--context", "Maya", "--dry-run", "--format", "json").stdout
        ),
    }
    for name, obj in outputs.items():
        times = times_in(obj)
        assert times, name
        bad = [(where, value) for where, value in times if not OFFSET.match(value)]
        assert not bad, (name, bad)
    assert outputs["show"][0]["history"][0]["invalid_at"].endswith("Z")
    window = outputs["recall"]["time_window"]
    assert window["start"] == "2026-05-01T00:00:00-04:00", window
    # Each one names the moment the store holds.
    assert datetime.fromisoformat(outputs["list"][-1]["mentioned_at"]) == datetime.fromisoformat(
        "2026-03-10T00:00:00-04:00"
    )

    export = tmp_path / "out.jsonl"
    mem(db_path, "export", "-o", str(export))
    facts = [json.loads(line) for line in export.read_text().splitlines()]
    fact = next(r for r in facts if r.get("kind") == "fact")
    # The export file keeps the store's own form.
    assert fact["mentioned_at"] == "2026-03-10T04:00:00", fact
