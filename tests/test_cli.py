"""The `mem` command as a user runs it: results on stdout, messages on stderr, bad input gets
one line and a non-zero exit, and nothing is lost or half written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from tests.conftest import write_jsonl

runner = CliRunner()


def mem(db: Path, *args: str, input: str | None = None):
    return runner.invoke(app, ["--db", str(db), *args], input=input)


def fact_count(db: Path) -> int:
    from memcli.store import Store

    with Store(db) as s:
        return s.facts.fact_count()


def test_retain_then_recall_as_text_json_and_md(db_path):
    r = mem(
        db_path,
        "retain",
        "--at",
        "2026-03-21",
        "--context",
        "Maya",
        "Decided to book the Lisbon trip for May.",
    )
    assert r.exit_code == 0, r.stderr
    assert "1 facts stored" in r.stderr and r.stdout == ""
    r = mem(db_path, "recall", "Lisbon trip", "--now", "2026-11-20")
    assert r.exit_code == 0
    assert r.stdout.splitlines()[0] == 'Memories relevant to "Lisbon trip", as of 2026-11-20:'
    assert r.stdout.splitlines()[2:] == [
        "[2026-03-21] Maya: Decided to book the Lisbon trip for May."
    ]
    r = mem(db_path, "recall", "Lisbon trip", "--format", "json")
    obj = json.loads(r.stdout)
    assert obj["results"][0]["context"] == "Maya"
    r = mem(db_path, "recall", "Lisbon trip", "--format", "md")
    assert r.stdout.startswith("## Memories for: Lisbon trip")


def test_trace_shows_arm_ranks_scores_window_and_timings(db_path):
    mem(db_path, "retain", "--at", "2024-03-12", "Bought a green kayak in March.")
    r = mem(db_path, "recall", "kayak in March 2024", "--trace", "--now", "2026-01-01")
    assert r.exit_code == 0
    for needle in (
        "sem",
        "kw",
        "grph",
        "temp",
        "rrf",
        "final",
        "time window: 2024-03-01",
        "reranker: none",
        "time (ms)",
    ):
        assert needle in r.stdout


def test_stdin_file_and_jsonl_inputs(db_path, tmp_path):
    assert mem(db_path, "retain", "-", input="From stdin: the boiler was serviced.").exit_code == 0
    note = tmp_path / "note.txt"
    note.write_text("From a file: the car needs new tyres.")
    assert mem(db_path, "retain", "--file", str(note)).exit_code == 0
    batch = write_jsonl(
        tmp_path / "b.jsonl",
        [
            {
                "id": "x1",
                "text": "From JSONL: dentist on Friday.",
                "timestamp": "2026-02-01T10:00:00Z",
                "tags": ["health"],
                "type": "experience",
                "metadata": {"k": 1},
            },
            {"text": "From JSONL: renew passport."},
        ],
    )
    r = mem(db_path, "retain", "--jsonl", str(batch), "--json")
    assert r.exit_code == 0
    stored = json.loads(r.stdout)["stored"]
    assert [s["source_id"] for s in stored] == ["x1", None]
    assert fact_count(db_path) == 4


@pytest.mark.parametrize(
    "line,message",
    [
        ("{not json", "line 2: not JSON"),
        ('{"id": "x"}', 'line 2: missing or empty "text"'),
        ('{"text": "ok", "timestamp": "the twelfth of never"}', "line 2: bad timestamp"),
    ],
)
def test_a_bad_jsonl_line_fails_the_batch_and_writes_nothing(db_path, tmp_path, line, message):
    mem(db_path, "retain", "existing memory stays")
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "good line"}\n' + line + '\n{"text": "another"}\n')
    r = mem(db_path, "retain", "--jsonl", str(path))
    assert r.exit_code == 1
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert fact_count(db_path) == 1
    r = mem(db_path, "retain", "--jsonl", str(path), "--skip-invalid")
    assert r.exit_code == 0 and "1 invalid lines skipped" in r.stderr
    assert fact_count(db_path) == 3


def test_empty_text_and_non_utf8_file(db_path, tmp_path):
    r = mem(db_path, "retain", "   ")
    assert r.exit_code == 1 and "empty" in r.stderr
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9".encode("latin-1"))
    r = mem(db_path, "retain", "--file", str(bad))
    assert r.exit_code == 1 and "not UTF-8" in r.stderr
    assert not db_path.exists()  # nothing was created for input that failed


def test_a_db_that_is_not_sqlite_is_left_untouched(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("my precious notes")
    for args in (["retain", "hello"], ["recall", "hello"]):
        r = mem(path, *args)
        assert r.exit_code == 1 and "not an SQLite database" in r.stderr
    assert path.read_text() == "my precious notes"


def test_unknown_bank_and_missing_db_on_recall(db_path):
    r = mem(db_path, "recall", "anything")
    assert r.exit_code == 1 and "no mem store" in r.stderr
    mem(db_path, "retain", "hello world")
    r = mem(db_path, "--bank", "work", "recall", "anything")
    assert r.exit_code == 1 and "unknown bank 'work'" in r.stderr


def test_bad_reranker_file_gets_a_clear_error(db_path, tmp_path):
    mem(db_path, "retain", "hello world")
    junk = tmp_path / "model.gguf"
    junk.write_text("not a model")
    r = mem(db_path, "recall", "hello", "--reranker", str(junk))
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1


def test_recall_batch_jsonl_in_and_out(db_path, tmp_path):
    mem(db_path, "retain", "--at", "2026-05-12", "In Lisbon with Priya, eating pastéis de nata.")
    mem(db_path, "retain", "--at", "2026-09-27", "Finished the Berlin half marathon.")
    queries = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"id": "q1", "query": "Lisbon pastries"},
            {"id": "q2", "query": "half marathon", "now": "2026-10-01", "limit": 1},
        ],
    )
    r = mem(db_path, "recall", "--batch", str(queries), "--format", "text")
    assert r.exit_code == 0
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["id"] for x in lines] == ["q1", "q2"]
    assert "Lisbon" in lines[0]["results"][0]["text"]
    assert lines[1]["now"] == "2026-10-01T00:00:00" and len(lines[1]["results"]) == 1


def test_help_loads_no_model_and_is_fast():
    code = (
        "import sys, subprocess; from typer.testing import CliRunner; from memcli.cli import app;"
        "r = CliRunner().invoke(app, ['recall', '--help']); assert r.exit_code == 0;"
        "assert 'llama_cpp' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_two_writers_at_once_both_succeed(db_path, tmp_path):
    files = []
    for w in range(2):
        files.append(
            write_jsonl(
                tmp_path / f"w{w}.jsonl",
                [
                    {"id": f"w{w}-{i}", "text": f"Writer {w} item {i} about topic {i * 7 + w}."}
                    for i in range(150)
                ],
            )
        )
    env = {**os.environ}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "memcli", "--db", str(db_path), "retain", "--jsonl", str(f)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for f in files
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    assert fact_count(db_path) == 300


def test_ctrl_c_during_import_keeps_committed_batches(db_path, tmp_path):
    import signal
    import time

    path = write_jsonl(
        tmp_path / "big.jsonl",
        [
            {"id": str(i), "text": f"Import line {i} mentions the number {i * 13}."}
            for i in range(3000)
        ],
    )
    p = subprocess.Popen(
        [sys.executable, "-m", "memcli", "--db", str(db_path), "retain", "--jsonl", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # A test run from a background job inherits SIGINT as ignored, and Python then installs
        # no KeyboardInterrupt handler: give the child the default, as a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        time.sleep(0.2)
        if db_path.exists() and _committed(db_path) >= 64:
            break
    assert p.poll() is None, "the import finished before it could be interrupted"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err.decode()
    kept = _committed(db_path)
    assert 64 <= kept < 3000 and kept % 64 == 0  # whole batches only
    assert "interrupted: kept" in err.decode()


def _committed(db: Path) -> int:
    """Facts committed so far, read by another connection as a second process would."""
    from memcli.store import Store, StoreError

    try:
        with Store(db, create=False, readonly=True) as s:
            return s.facts.fact_count()
    except StoreError:
        return 0  # not created yet


def test_a_budget_too_small_says_so_instead_of_no_match(db_path):
    assert mem(db_path, "retain", "The spare key is under the blue pot by the door.").exit_code == 0
    r = mem(db_path, "recall", "spare key", "--max-tokens", "3")
    assert r.exit_code == 2  # a usage error, as for a budget that holds the memory alone
    assert r.stdout == ""
    assert "--max-tokens 3 cannot hold the header line and one memory: give at least" in r.stderr
    r = mem(db_path, "recall", "zzzqqq", "--arms", "keyword")
    assert "no memories matched" in r.stderr
