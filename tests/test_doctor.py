"""`mem doctor` on real stores: passes on a sound one, fails naming the problem on one with a
deleted FTS row, a deleted vector or a bank whose model changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import apsw
import pytest
import sqlite_vec
from typer.testing import CliRunner

from memcli.cli import app

runner = CliRunner()


def mem(db, *args: str):
    return runner.invoke(app, ["--db", str(db), *args])


def make_store(db) -> None:
    for text in ("The boiler was serviced by Anton.", "Maya booked the Lisbon trip for May."):
        r = mem(db, "retain", "--at", "2026-04-02", text)
        assert r.exit_code == 0, r.stderr


def raw(db) -> apsw.Connection:
    """A plain SQLite connection, to damage the file the way a bug or a crash could."""
    conn = apsw.Connection(str(db))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    return conn


def checks(db) -> tuple[int, dict]:
    r = mem(db, "doctor", "--format", "json")
    return r.exit_code, json.loads(r.stdout)


def by_name(obj: dict) -> dict[str, dict]:
    return {c["name"]: c for c in obj["checks"]}


def test_passes_on_a_fresh_store_and_prints_every_check(db_path):
    make_store(db_path)
    r = mem(db_path, "doctor")
    assert r.exit_code == 0, r.stdout + r.stderr
    for name in (
        "sqlite quick_check",
        "fts5 integrity-check",
        "facts = FTS rows = vectors: 2 facts, 2 FTS rows, 2 vectors",
        "orphan rows",
        "embedder of bank 'default'",
        "bundled embedder weights",
        "sqlite-vec: v0.1.9",
        "llama.cpp",
        "tiktoken offline",
        "files left beside the store: none",
    ):
        assert name in r.stdout, name
    assert "FAIL" not in r.stdout and "\x1b[" not in r.stdout
    code, obj = checks(db_path)
    assert code == 0 and obj["ok"] is True
    assert {c["status"] for c in obj["checks"]} <= {"ok", "warn", "skip"}


def test_a_deleted_fts_row_fails_and_names_the_fact(db_path):
    make_store(db_path)
    with raw(db_path) as conn:
        fact_id = conn.execute("SELECT min(id) FROM facts").fetchone()[0]
        conn.execute("DELETE FROM fact_fts WHERE rowid = ?", (fact_id,))
    r = mem(db_path, "doctor")
    assert r.exit_code == 1
    line = next(x for x in r.stdout.splitlines() if "facts = FTS rows" in x)
    assert line.startswith("FAIL")
    assert "2 facts, 1 FTS rows, 2 vectors" in line
    assert f"facts with no FTS row (the keyword arm cannot find them): id {fact_id}" in line
    assert "1 of" in r.stderr and "checks failed" in r.stderr
    code, obj = checks(db_path)
    assert code == 1 and obj["ok"] is False
    assert [c["name"] for c in obj["checks"] if c["status"] == "fail"] == [
        "facts = FTS rows = vectors"
    ]


def test_a_deleted_vector_and_a_changed_model_fail(db_path):
    make_store(db_path)
    with raw(db_path) as conn:
        fact_id = conn.execute("SELECT max(id) FROM facts").fetchone()[0]
        conn.execute("DELETE FROM fact_vec WHERE fact_id = ?", (fact_id,))
        conn.execute(
            "UPDATE banks SET embedder_fingerprint = ? WHERE name = 'default'", ("0" * 64,)
        )
    code, obj = checks(db_path)
    assert code == 1
    found = by_name(obj)
    assert found["facts = FTS rows = vectors"]["status"] == "fail"
    assert "facts with no vector" in found["facts = FTS rows = vectors"]["detail"]
    assert f"id {fact_id}" in found["facts = FTS rows = vectors"]["detail"]
    emb = found["embedder of bank 'default'"]
    assert emb["status"] == "fail" and "000000000000" in emb["detail"]


def test_no_store_yet_is_not_a_failure(tmp_path):
    code, obj = checks(tmp_path / "none.db")
    assert code == 0
    assert by_name(obj)["store"]["status"] == "skip"
    assert not (tmp_path / "none.db").exists()  # the doctor creates nothing


def test_a_writer_holding_the_lock_is_waited_for_not_reported(db_path):
    """A retain running beside doctor holds the write lock; FTS5's check needs it, and
    inside doctor's read snapshot it failed at once with "database is locked"."""
    import threading
    import time

    make_store(db_path)
    writer = raw(db_path)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO meta(key, value) VALUES ('held', '1')")
    # Commit only after doctor has begun to wait (its checks before FTS take ~ms).
    release = threading.Timer(1.0, lambda: writer.execute("COMMIT"))
    release.start()
    try:
        t0 = time.monotonic()
        code, obj = checks(db_path)
    finally:
        release.join()
        writer.close()
    assert by_name(obj)["fts5 integrity-check"]["status"] == "ok", obj
    assert code == 0
    assert time.monotonic() - t0 >= 0.9  # it waited for the writer


def test_a_damaged_file_is_reported_among_the_checks(db_path, tmp_path):
    make_store(db_path)
    for i in range(200):
        assert mem(db_path, "retain", f"Filler memory number {i} about the shed.").exit_code == 0
    data = bytearray(db_path.read_bytes())
    data[50_000:58_000] = b"\xde\xad" * 4000  # pages of the file overwritten, header intact
    db_path.write_bytes(bytes(data))
    for p in db_path.parent.glob(db_path.name + "-*"):
        p.unlink()
    r = mem(db_path, "doctor")
    assert r.exit_code == 1
    assert "FAIL" in r.stdout, r.stdout + r.stderr
    assert "tiktoken offline" in r.stdout  # the checks after the store's still ran
    assert "Traceback" not in r.stdout + r.stderr


def test_a_damaged_model_cache_is_reported_and_left_as_it_is(db_path, tmp_path):
    """The embedder check resolved the model the way recall does, which converts a damaged
    cached GGUF again: doctor rewrote the file (and the hash records) and then passed every
    check, where the README says it never writes."""
    import hashlib
    import shutil

    from memcli.models.convert import default_embedder_path

    make_store(db_path)
    real = default_embedder_path()
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    for part in (real, real.with_name(real.name + ".sha256")):
        shutil.copy(part, cache / "models" / part.name)
    damaged = cache / "models" / real.name
    with open(damaged, "r+b") as f:
        f.seek(30_000_000)
        byte = f.read(1)
        f.seek(30_000_000)
        f.write(bytes([byte[0] ^ 0xFF]))
    before = hashlib.sha256(damaged.read_bytes()).hexdigest()
    files_before = sorted(p.name for p in (cache / "models").iterdir())
    result = subprocess.run(  # a process of its own: the model path is remembered per process
        [sys.executable, "-m", "memcli", "--db", str(db_path), "doctor", "--format", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "MEM_CACHE_DIR": str(cache)},
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    failed = {c["name"] for c in json.loads(result.stdout)["checks"] if c["status"] == "fail"}
    assert f"model cache {real.name}" in failed, result.stdout
    assert hashlib.sha256(damaged.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in (cache / "models").iterdir()) == files_before


def test_a_configured_reranker_that_is_not_there_fails(db_path, tmp_path, monkeypatch):
    """A reranker path set in the config that is not there failed every recall, while the
    doctor passed every check."""
    make_store(db_path)
    cfg = tmp_path / "config.toml"
    cfg.write_text('reranker = "/nonexistent/rerank.gguf"\n')
    monkeypatch.setenv("MEM_CONFIG", str(cfg))
    result = mem(db_path, "doctor", "--format", "json")
    assert result.exit_code == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["reranker"]["status"] == "fail"
    assert "/nonexistent/rerank.gguf" in checks["reranker"]["detail"]


def test_a_writer_holding_the_lock_past_the_timeout_skips_the_fts_check(db_path):
    """An import longer than the busy timeout beside doctor: the FTS check reported FAIL
    ("locked by another process ... nothing was written, try again"), exit 1, about an
    index nobody had looked at."""
    import subprocess
    import sys

    make_store(db_path)
    writer = raw(db_path)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO meta(key, value) VALUES ('held', '1')")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memcli", "--db", str(db_path), "doctor", "--format", "json"],
            capture_output=True,
            text=True,
            env={**os.environ, "MEM_BUSY_TIMEOUT_MS": "300"},
            timeout=120,
        )
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    obj = json.loads(done.stdout)
    fts = by_name(obj)["fts5 integrity-check"]
    assert fts["status"] == "skip" and "locked by another process" in fts["detail"], fts
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize(
    "column, value", [("tags", "pets"), ("tags", '{"a": 1}'), ("tags", "[1]"), ("metadata", "[]")]
)
def test_a_fact_field_damaged_by_hand_is_reported_and_the_fact_still_reads(db_path, column, value):
    """tags set to 'pets' by hand: every command (list, show, recall, export, even forget
    of that fact) failed with "unexpected JSONDecodeError", and doctor passed."""
    make_store(db_path)
    writer = raw(db_path)
    writer.execute(f"UPDATE facts SET {column} = ? WHERE id = 1", (value,))
    writer.close()
    code, obj = checks(db_path)
    fields = by_name(obj)["fact fields"]
    assert code == 1 and fields["status"] == "fail" and "fact id 1" in fields["detail"], fields
    for args in (["list"], ["show", "1"], ["export"], ["forget", "1", "--yes"]):
        out = mem(db_path, *args)
        assert out.exit_code == 0, (args, out.output)
    code, obj = checks(db_path)
    assert code == 0, obj
