"""`mem export` / `mem import` (issue 8): a lossless JSONL round trip through the CLI on a real
store and the real embedder, and bad files that leave the store exactly as it was."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli import exchange
from memcli.cli import app
from memcli.lifecycle import LifecycleError
from memcli.store import Store
from tests.conftest import write_jsonl

runner = CliRunner()

TURNS = [
    {"id": "t1", "text": "I adopted a beagle named Biscuit in March.", "context": "Ana",
     "timestamp": "2024-03-02T10:00:00", "document_id": "s1", "tags": ["pets"]},
    {"id": "t2", "text": "Biscuit loves the beach at Cascais.", "context": "Ana",
     "timestamp": "2024-03-02T10:01:00", "document_id": "s1", "tags": ["pets"]},
    {"id": "t3", "text": "Because of Biscuit, we moved closer to the park.", "context": "Ana",
     "timestamp": "2024-03-02T10:02:00", "document_id": "s1"},
    {"id": "t4", "text": "Ben started a new job at Siemens in Munich last week.",
     "context": "Ben", "timestamp": "2024-05-10T09:00:00", "metadata": {"mood": "happy"}},
    {"id": "t5", "text": "Ben's job at Siemens in Munich is going well.", "context": "Ben",
     "timestamp": "2024-06-10T09:00:00"},
    {"id": "t6", "text": "我们去了北京的长城。", "context": "Li",
     "timestamp": "2024-07-01T12:00:00"},
]  # fmt: skip


def mem(db: Path, *args: str, input: str | None = None):
    return runner.invoke(app, ["--db", str(db), *args], input=input)


def ok(result) -> str:
    assert result.exit_code == 0, result.stderr
    return result.stdout


def one_line_error(result, *needles: str) -> str:
    assert result.exit_code != 0
    err = result.stderr.strip()
    assert err.startswith("mem: error: ") and "\n" not in err, err
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A store with documents, chunks, entities, links, tags, metadata, CJK text, a
    correction and a forgotten fact (so ids have a gap)."""
    db = tmp_path / "source.db"
    ok(mem(db, "retain", "--jsonl", str(write_jsonl(tmp_path / "turns.jsonl", TURNS))))
    ok(mem(db, "retain", "--at", "2024-08-01", "--tag", "tmp", "A note that will be forgotten."))
    ok(mem(db, "forget", "--tag", "tmp", "--yes"))
    ok(mem(db, "correct", "4", "Ben started a new job at Bosch in Stuttgart."))
    return db


def table_counts(db: Path) -> dict[str, int]:
    with Store(db) as s:
        return s.health.row_counts()


def test_round_trip_is_byte_identical(source: Path, tmp_path: Path, monkeypatch) -> None:
    # Pages of two rows: the export's keyset paging crosses many page boundaries.
    monkeypatch.setattr("memcli.store.exchange.PAGE", 2)
    first = ok(mem(source, "export"))
    fresh = tmp_path / "fresh.db"
    r = mem(fresh, "import", "-", input=first)
    ok(r)
    assert "imported bank 'default'" in r.stderr
    again = ok(mem(fresh, "export"))
    assert again == first
    # Nothing is lost on the way: every table holds as many rows as in the source.
    assert table_counts(fresh) == table_counts(source)
    kinds = [json.loads(line)["kind"] for line in first.splitlines()]
    assert kinds[0] == "header" and kinds[-1] == "end"
    assert {"document", "chunk", "entity", "fact", "link"} <= set(kinds)
    # The correction and its validity came along: the old fact is closed, recall skips it.
    facts = {
        json.loads(line)["id"]: json.loads(line) for line in first.splitlines() if '"fact"' in line
    }
    assert facts[4]["superseded_by"] is not None and facts[4]["invalid_at"] is not None
    out = ok(mem(fresh, "recall", "Where does Ben work?", "--limit", "3"))
    assert "Bosch" in out and "Siemens in Munich last week" not in out


def test_round_trip_with_vectors_keeps_them_bit_for_bit(source: Path, tmp_path: Path) -> None:
    first = ok(mem(source, "export", "--with-vectors"))
    header = json.loads(first.splitlines()[0])
    assert header["vectors"]["dim"] == 384
    fresh = tmp_path / "fresh.db"
    r = mem(fresh, "import", "-", input=first)
    assert "vectors from the file" in r.stderr, r.stderr
    assert ok(mem(fresh, "export", "--with-vectors")) == first


def test_recomputed_vectors_equal_the_originals(source: Path, tmp_path: Path, embedder) -> None:
    """An import without vectors embeds what retain embedded (speaker, date, lead-in)."""
    import numpy as np

    fresh = tmp_path / "fresh.db"
    ok(mem(fresh, "import", "-", input=ok(mem(source, "export"))))
    with Store(source) as a, Store(fresh) as b:
        ids = a.facts.fact_ids_of_bank(a.banks.require_bank("default"))
        va, vb = a.vectors.vectors_for(ids), b.vectors.vectors_for(ids)
    assert set(va) == set(vb) == set(ids)
    for i in ids:
        assert float(np.dot(va[i], vb[i])) > 0.9999, i


def test_import_beside_another_bank_renumbers_consistently(source: Path, tmp_path: Path) -> None:
    dump = ok(mem(source, "export"))
    r = mem(source, "import", "--into", "copy", "-", input=dump)
    ok(r)
    assert "new ids for" in r.stderr
    copy = ok(mem(source, "--bank", "copy", "export"))

    # Same content, other ids: the export with ids stripped matches line for line.
    def strip(text: str) -> list[dict]:
        out = []
        for line in text.splitlines()[1:]:
            rec = json.loads(line)
            for key in ("id", "document_id", "chunk_id", "superseded_by", "entities", "from", "to"):
                rec.pop(key, None)
            out.append(rec)
        return out

    assert strip(copy) == strip(dump)
    out = ok(mem(source, "--bank", "copy", "recall", "What is the dog called?", "--limit", "2"))
    assert "Biscuit" in out
    ok(mem(source, "banks", "--delete", "copy", "--yes"))
    # The same bank, but for the ids the copy took: never given again.
    after = ok(mem(source, "export")).splitlines()
    header, before = json.loads(after[0]), json.loads(dump.splitlines()[0])
    assert header.pop("fact_id_high") > before.pop("fact_id_high")
    assert header == before and after[1:] == dump.splitlines()[1:]


def test_export_to_file_and_unknown_bank(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "dump.jsonl"
    r = mem(source, "export", "-o", str(out))
    assert r.stdout == "" and out.read_text() == ok(mem(source, "export"))
    assert not list(tmp_path.glob(".dump.jsonl*"))
    one_line_error(mem(source, "export", "--bank", "nope"), "unknown bank 'nope'")


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_export_never_writes_over_the_store(source: Path, suffix: str) -> None:
    before = table_counts(source)
    one_line_error(mem(source, "export", "-o", f"{source}{suffix}"), "store's own file")
    assert table_counts(source) == before
    assert ok(mem(source, "list"))


def test_export_refuses_another_sqlite_file(source: Path, target: Path) -> None:
    before = target.read_bytes()
    one_line_error(mem(source, "export", "-o", str(target)), "SQLite database")
    assert target.read_bytes() == before


def test_export_through_a_symlink_keeps_the_link(source: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    ok(mem(source, "export", "-o", str(link)))
    assert link.is_symlink() and link.read_text() == ok(mem(source, "export"))


def test_export_file_is_private_and_dash_is_stdout(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "new.jsonl"
    ok(mem(source, "export", "-o", str(out)))
    assert out.stat().st_mode & 0o777 == 0o600
    assert ok(mem(source, "export", "-o", "-")) == out.read_text()
    assert not (Path.cwd() / "-").exists()
    for name in ("", ".", "/"):
        r = mem(source, "export", "-o", name)
        assert r.exit_code == 2 and "not a file name" in r.stderr and "- for stdout" in r.stderr


def test_export_into_a_fifo_is_read_by_its_reader(source: Path, tmp_path: Path) -> None:
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    ok(mem(source, "export", "-o", str(fifo)))
    reader.join(timeout=30)
    assert fifo.exists() and not fifo.is_file()
    assert got == [ok(mem(source, "export"))]


def _banks(db: Path) -> list[str]:
    with Store(db) as s:
        return s.banks.bank_names()


def _bad_import(db: Path, text: str, *needles: str, args: tuple[str, ...] = ()) -> None:
    before = table_counts(db), _banks(db)
    one_line_error(mem(db, "import", *args, "-", input=text), *needles)
    assert (table_counts(db), _banks(db)) == before


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A store that already holds another bank: a failed import must leave it as it was."""
    db = tmp_path / "target.db"
    ok(mem(db, "--bank", "other", "retain", "Something already stored."))
    return db


def test_half_written_file_changes_nothing(source: Path, target: Path) -> None:
    dump = ok(mem(source, "export"))
    lines = dump.splitlines(keepends=True)
    cut_mid_line = "".join(lines[:-3]) + lines[-3][: len(lines[-3]) // 2]
    _bad_import(target, cut_mid_line, "not JSON", "half-written")
    no_end = "".join(lines[:-1])
    _bad_import(target, no_end, "without its end record")
    missing_rows = "".join(lines[:3] + lines[4:])
    _bad_import(target, missing_rows, "header promised")


def test_wrong_kind_of_line_changes_nothing(source: Path, target: Path) -> None:
    lines = ok(mem(source, "export")).splitlines(keepends=True)
    retain_line = json.dumps({"text": "a retain item", "context": "x"}) + "\n"
    _bad_import(target, "".join(lines[:5] + [retain_line] + lines[5:]), "line 6", "unknown kind")
    _bad_import(target, retain_line, "line 1", "retain input")
    recall_out = ok(mem(source, "recall", "Biscuit", "--format", "json"))
    _bad_import(target, recall_out, "recall output")
    # A link line before the documents: the order is part of the format.
    links = [x for x in lines if x.startswith('{"kind":"link"')]
    _bad_import(target, "".join(lines[:1] + links[:1] + lines[1:]), "comes after")
    # A fact before the entities it names.
    facts = [x for x in lines if x.startswith('{"kind":"fact"') and '"entities":[]' not in x]
    _bad_import(target, "".join(lines[:1] + facts[:1] + lines[1:]), "entity", "before it")
    bad_field = lines[:]
    i = next(i for i, x in enumerate(lines) if x.startswith('{"kind":"fact"'))
    rec = json.loads(lines[i])
    rec["mentioned_at"] = 17
    bad_field[i] = json.dumps(rec) + "\n"
    _bad_import(target, "".join(bad_field), f"line {i + 1}", "mentioned_at")
    _bad_import(target, "", "empty")


def test_other_schema_version_is_refused(source: Path, target: Path) -> None:
    lines = ok(mem(source, "export")).splitlines(keepends=True)
    header = json.loads(lines[0])
    header["schema"] = header["schema"] - 1
    _bad_import(target, json.dumps(header) + "\n" + "".join(lines[1:]), "schema")


def test_vectors_of_another_embedder_are_refused_unless_reembedded(
    source: Path, target: Path
) -> None:
    lines = ok(mem(source, "export", "--with-vectors")).splitlines(keepends=True)
    header = json.loads(lines[0])
    header["bank"]["embedder"] = "some-other-model"
    header["bank"]["embedder_fingerprint"] = "0" * 64
    foreign = json.dumps(header) + "\n" + "".join(lines[1:])
    _bad_import(target, foreign, "--reembed", "some-other-model")
    r = mem(target, "import", "--reembed", "-", input=foreign)
    ok(r)
    assert "embedded" in r.stderr
    # The bank records the embedder that really made its vectors.
    with Store(target) as s:
        name, fp = s.vectors.bank_embedder(s.banks.require_bank("default"))
    assert name != "some-other-model" and fp != "0" * 64


def test_existing_bank_is_not_merged_into(source: Path) -> None:
    dump = ok(mem(source, "export"))
    before = table_counts(source)
    one_line_error(mem(source, "import", "-", input=dump), "already exists", "--into")
    assert table_counts(source) == before


def test_interrupted_import_leaves_the_store_as_it_was(source: Path, target: Path, embedder):
    """Ctrl-C half way (raised from the progress callback, as a signal would) rolls back."""
    dump = ok(mem(source, "export"))
    before = table_counts(target)
    seen = []

    def interrupt(n: int) -> None:
        seen.append(n)
        raise KeyboardInterrupt

    with Store(target) as store, pytest.raises(KeyboardInterrupt):
        exchange.import_lines(
            store,
            dump.splitlines(),
            name="dump",
            bank=None,
            embedder=lambda: embedder,
            progress=interrupt,
        )
    assert seen and table_counts(target) == before


def test_not_utf8_and_missing_file(tmp_path: Path, target: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"kind":"header"\xff}\n')
    one_line_error(mem(target, "import", str(bad)), "UTF-8")
    one_line_error(mem(target, "import", str(tmp_path / "missing.jsonl")), "cannot read")


@pytest.mark.parametrize("via", ["path", "stdin"])
def test_a_bad_byte_is_named_at_its_line(source: Path, target: Path, tmp_path: Path, via):
    """The offset said was counted from the start of the 8 KB block being decoded, not
    of the file; the line (and the column in it) is what a user can find."""
    lines = ok(mem(source, "export")).splitlines(keepends=True)
    filler = '{"kind":"document"}\r\n' * 2000  # never read: the bad byte comes first
    data = "".join(lines[:3]).encode() + b'{"kind":"chunk","text":"caf\xe9"}\n' + filler.encode()
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data)
    before = table_counts(target)
    if via == "path":
        r = mem(target, "import", str(bad))
    else:
        r = runner.invoke(app, ["--db", str(target), "import", "-"], input=data)
    one_line_error(r, "line 4 is not UTF-8 text (bad byte at column 28)", "nothing imported")
    assert table_counts(target) == before


def test_line_ends_read_as_before(source: Path, tmp_path: Path) -> None:
    """CRLF and a lone CR end lines as they did when the file was read as text."""
    dump = ok(mem(source, "export"))
    for end in ("\r\n", "\r"):
        path = tmp_path / f"ends{len(end)}.jsonl"
        path.write_bytes(dump.replace("\n", end).encode())
        fresh = tmp_path / f"fresh{len(end)}.db"
        ok(mem(fresh, "import", str(path)))
        assert ok(mem(fresh, "export")) == dump


INF = float("inf")
# (kind, key, bad value, what the error names): each value has the right JSON type or is
# JSON that Python's reader accepts (NaN, Infinity, 1e400, a lone surrogate escape), so
# only a check of the value itself refuses it; each was stored before and broke `list`,
# `show` or recall later, or crashed the import with a traceback.
BAD_VALUES = [
    ("fact", "mentioned_at", "garbage", "mentioned_at"),
    ("fact", "occurred_start", "2024-13-45T00:00:00", "occurred_start"),
    ("fact", "event_time", "2024-03-02T10:00:00+02:00", "event_time"),
    ("fact", "created_at", "", "created_at"),
    ("fact", "tags", [1], "tags"),
    ("fact", "tags", ["\ud800"], "tags"),
    ("fact", "text", "", "text"),
    ("fact", "text", "\x00", "text"),
    ("fact", "text", "\x01\x02 ", "text"),
    ("fact", "text", "ok\ud800", "text"),
    ("fact", "context", "a\x00b", "context"),
    ("fact", "fact_type", "dream", "fact_type"),
    ("fact", "entities", [999], "entities"),
    ("fact", "entities", ["x"], "entities"),
    ("fact", "metadata", {"x": INF}, "metadata"),
    ("fact", "metadata", {"x": [float("nan")]}, "metadata"),
    ("fact", "id", 10**24, "id"),
    ("fact", "id", -3, "id"),
    ("fact", "proof_count", -1, "proof_count"),
    ("fact", "colour", "red", "colour"),
    ("entity", "name", " ", "name"),
    ("entity", "aliases", [3], "aliases"),
    ("entity", "keys", ["\ud800"], "keys"),
    ("entity", "mention_count", -5, "mention_count"),
    ("entity", "last_seen", "soon", "last_seen"),
    ("document", "external_id", "", "external_id"),
    ("document", "created_at", "2024-02-30T00:00:00", "created_at"),
    ("document", "sync_root", "notes/vault", "sync_root"),
    ("document", "sync_root", "", "sync_root"),
    ("document", "sync_root", 7, "sync_root"),
    ("document", "sync_root", "/vault\x00/x", "sync_root"),
    ("document", "source_hash", ["ab"], "source_hash"),
    ("document", "source_hash", " ", "source_hash"),
    ("chunk", "text", "x\x00y", "text"),
    ("link", "weight", float("nan"), "weight"),
    ("link", "weight", INF, "weight"),
    ("link", "link", "friendship", "link"),
    ("link", "from", 10**30, "from"),
    # Within 64 bits but outside the header's ids: shifted past the target's ids, these
    # overflowed SQLite's INTEGER (an OverflowError traceback).
    ("link", "to", 2**63 - 1, "to"),
    ("fact", "superseded_by", 2**63 - 1, "superseded_by"),
    ("chunk", "document_id", 2**63 - 2, "document_id"),
]


def _with_value(lines: list[str], kind: str, key: str, value) -> tuple[str, int]:
    i = next(i for i, x in enumerate(lines) if json.loads(x)["kind"] == kind)
    rec = json.loads(lines[i])
    rec[key] = value
    changed = lines[:]
    changed[i] = json.dumps(rec) + "\n"  # ensure_ascii: a surrogate goes in as \\ud800
    return "".join(changed), i + 1


@pytest.mark.parametrize(("kind", "key", "value", "named"), BAD_VALUES)
def test_bad_field_value_is_refused_before_anything_is_stored(
    source: Path, target: Path, kind: str, key: str, value, named: str
) -> None:
    lines = ok(mem(source, "export")).splitlines(keepends=True)
    text, number = _with_value(lines, kind, key, value)
    _bad_import(target, text, f"line {number}", repr(named))
    ok(mem(target, "--bank", "other", "list"))


def test_header_values_are_checked(source: Path, target: Path) -> None:
    lines = ok(mem(source, "export")).splitlines(keepends=True)
    header = json.loads(lines[0])
    header["bank"]["created_at"] = "yesterday"
    _bad_import(target, json.dumps(header) + "\n" + "".join(lines[1:]), "line 1", "created_at")
    header = json.loads(lines[0])
    header["ids"]["facts"] = [1, 10**40]
    _bad_import(target, json.dumps(header) + "\n" + "".join(lines[1:]), "line 1", "facts")
    # Before: "holds ... 2 facts ... but its header promised ... 2 facts": the count was "2".
    for count in ("2", 2.0, -1, True, None):
        header = json.loads(lines[0])
        header["counts"]["facts"] = count
        text = json.dumps(header) + "\n" + "".join(lines[1:])
        _bad_import(target, text, "line 1", "bad count for 'facts'")


def test_a_header_naming_an_unknown_table_is_refused_before_any_embedding(
    source: Path, target: Path, embedder
) -> None:
    lines = ok(mem(source, "export")).splitlines()
    header = json.loads(lines[0])
    header["ids"]["notes"] = [1, 2]
    _bad_import(target, "\n".join([json.dumps(header), *lines[1:]]), "line 1", "'notes'")
    loaded = []  # the model is loaded at the first embedding: never, here
    with Store(target) as store, pytest.raises(LifecycleError, match="unknown table 'notes'"):
        exchange.import_lines(
            store,
            [json.dumps(header), *lines[1:]],
            name="dump",
            bank="copy",
            embedder=lambda: loaded.append(1) or embedder,
        )
    assert loaded == []


def test_ids_that_overflow_once_moved_are_refused_in_one_line(source: Path, target: Path) -> None:
    """Before: "unexpected OverflowError: int too big to convert" (the ids are moved past
    the target's own ids, beyond 2^63 - 1)."""
    # The target's own fact (its "other" bank) has id 1, so the file's ids move.
    rows = [json.loads(line) for line in ok(mem(source, "export")).splitlines()]
    top = 2**63 - 1
    last = max(r["id"] for r in rows if r["kind"] == "fact")
    rows = [r for r in rows if r["kind"] != "link"]
    rows[0]["counts"]["links"] = rows[-1]["counts"]["links"] = 0
    for r in rows:
        if r["kind"] == "fact" and r["id"] == last:
            r["id"] = top
    rows[0]["ids"]["facts"] = [rows[0]["ids"]["facts"][0], top]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    _bad_import(target, text, "ids too large")


def test_what_retain_once_accepted_imports_again(tmp_path: Path) -> None:
    """The import's checks are not stricter than retain's ever were: a document id of a
    control character (retain took any id that was not blank; it now takes one line of
    visible text) exports from an older store and imports, whole."""
    db = tmp_path / "a.db"
    ok(mem(db, "retain", "--document", "tea", "Bob likes green tea."))
    dump = ok(mem(db, "export")).replace('"tea"', '"\\u0001"')
    assert '"\\u0001"' in dump
    ok(mem(tmp_path / "b.db", "import", "-", input=dump))
    assert ok(mem(tmp_path / "b.db", "export")) == dump


def test_an_import_into_a_new_path_makes_a_store_only_when_it_succeeds(
    source: Path, tmp_path: Path
) -> None:
    """A failed import into a path with no store leaves no file there (an empty store looked
    like a success to the next command), nor anything beside it; one that succeeds makes a
    private store holding the bank."""
    dump = ok(mem(source, "export"))
    lines = dump.splitlines(keepends=True)
    folder = tmp_path / "new" / "place"
    fresh = folder / "mem.db"
    for bad in ("".join(lines[:-1]), "not JSON\n", ""):
        one_line_error(mem(fresh, "import", "-", input=bad))
        assert not fresh.exists()
        assert not (tmp_path / "new").exists()  # nor the folders made for it
    under_a_file = tmp_path / "a-file" / "mem.db"
    under_a_file.parent.write_text("not a folder")
    one_line_error(mem(under_a_file, "import", "-", input=dump), f"cannot create {under_a_file}")
    ok(mem(fresh, "import", "-", input=dump))
    assert sorted(p.name for p in folder.iterdir()) == ["mem.db"]
    assert fresh.stat().st_mode & 0o777 == 0o600
    assert ok(mem(fresh, "export")) == dump


def test_a_store_made_meanwhile_at_the_path_is_left_alone(tmp_path: Path) -> None:
    """Another process that creates the store while an import builds it wins: the import
    fails in one line, and the other store is not touched."""
    from memcli.store import StoreError, fill_new_store

    fresh = tmp_path / "mem.db"

    def fill(store: Store) -> None:
        from datetime import datetime

        with store.atomic():
            store.banks.ensure_bank("mine", datetime(2026, 1, 1))
        ok(mem(fresh, "--bank", "theirs", "retain", "Made by another process."))

    with pytest.raises(StoreError, match="another process"):
        fill_new_store(fresh, fill)
    with Store(fresh) as s:
        assert s.banks.bank_id("mine") is None and s.banks.bank_id("theirs") is not None
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "mem.db"
    ]


@pytest.fixture(scope="module")
def big_export(tmp_path_factory) -> Path:
    """An export of 300 facts without vectors: importing it embeds them again (seconds)."""
    folder = tmp_path_factory.mktemp("big")
    db = folder / "source.db"
    rows = [
        {"id": f"n{i}", "text": f"Note {i}: the parcel for flat {i} came on day {i % 28 + 1}."}
        for i in range(300)
    ]
    ok(mem(db, "retain", "--jsonl", str(write_jsonl(folder / "n.jsonl", rows))))
    out = folder / "export.jsonl"
    ok(mem(db, "export", "-o", str(out)))
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_an_import_into_a_new_path_stopped_midway_leaves_no_store(big_export, tmp_path, sig):
    fresh = tmp_path / "mem.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "memcli", "--db", str(fresh), "import", str(big_export)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not any(p.name.endswith(".building") for p in tmp_path.iterdir()):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the import never started building"
        time.sleep(0.02)
    time.sleep(0.3)  # into the facts
    os.kill(proc.pid, sig)
    proc.wait(60)
    err = proc.stderr.read().decode()
    assert proc.returncode == (-9 if sig == signal.SIGKILL else 130), err
    assert not fresh.exists()
    if sig == signal.SIGINT:  # Ctrl-C also removes what it built
        assert list(tmp_path.iterdir()) == []
        # Before: exit 130 with nothing said (typer turns the KeyboardInterrupt into Exit).
        assert err.strip().splitlines()[-1] == "mem: interrupted", err
        assert "Traceback" not in err and "Exception ignored" not in err, err
    else:  # kill -9 cannot: the doctor names what it left, never the store
        r = mem(fresh, "doctor", "--format", "json")
        left = next(c for c in json.loads(r.stdout)["checks"] if c["name"].startswith("files"))
        assert left["status"] == "warn" and ".building" in left["detail"], left
    # The same import run to its end makes the store, and removes what the killed one left.
    ok(mem(fresh, "import", str(big_export)))
    with Store(fresh) as s:
        assert s.facts.fact_count() == 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mem.db"]


def test_only_a_killed_builders_files_are_removed(tmp_path: Path) -> None:
    """A staging file whose builder is gone is removed by the next command that may write;
    one whose builder still holds its lock is kept, even with a process id that runs
    nowhere here (another PID namespace or host on a shared folder)."""
    import fcntl

    store = tmp_path / "m.db"
    ok(mem(store, "retain", "Something kept."))
    dead = tmp_path / ".m.db.999999-deadbeef.building"
    held = tmp_path / ".m.db.999998-0badf00d.new"
    for f in (dead, Path(f"{dead}-wal"), held, Path(f"{held}-journal")):
        f.write_bytes(b"x")
    odd = tmp_path / ".m.db.99999999999999999999-deadbeef.new"  # no real process id
    odd.write_bytes(b"x")
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        doctor = json.loads(ok(mem(store, "doctor", "--format", "json")))
        left = next(c for c in doctor["checks"] if c["name"] == "files left beside the store")
        assert left["status"] == "warn" and dead.name in left["detail"], left
        assert "1 being built" not in left["detail"] and "2 being built" in left["detail"]
        ok(mem(store, "retain", "Something else."))  # an existing store: still cleared
        names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".m.db."))
        assert names == sorted([held.name, f"{held.name}-journal", odd.name])
    finally:
        os.close(fd)
    ok(mem(store, "retain", "A third thing."))  # the lock is gone: now it is garbage
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".m.db."))
    assert names == [odd.name]  # a name with no valid process id is never taken as ours


def test_a_full_disk_during_an_import_into_a_new_path_names_that_path(
    big_export: Path, tmp_path: Path
) -> None:
    import resource

    # With vectors: read once, nothing is written but the store. (A file without them is
    # first copied to a temporary file, which the limit below stops: the second run.)
    dump = tmp_path / "with-vectors.jsonl"
    ok(mem(big_export.parent / "source.db", "export", "--with-vectors", "-o", str(dump)))
    empty = tmp_path / "empty.db"
    Store(empty).close()
    limit = empty.stat().st_size + 64 * 1024  # room for the schema, not for 300 facts
    empty.unlink()
    fresh = tmp_path / "new" / "mem.db"
    for source, message in (
        (dump, f"mem: error: disk full writing {fresh} ("),
        (big_export, f"mem: error: cannot copy {big_export} to a temporary file (File too large;"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "memcli", "--db", str(fresh), "import", str(source)],
            capture_output=True,
            text=True,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
        )
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1, proc.stderr
        assert ".building" not in proc.stderr and not fresh.exists()
        assert not fresh.parent.exists()


@pytest.mark.parametrize("shape", ["loop", "self"])
def test_a_correction_chain_that_comes_back_to_itself_is_refused(
    source: Path, target: Path, shape: str
) -> None:
    """Before: imported, with no version of the fact current (in no list and no recall),
    and `mem doctor` passed."""
    rows = [json.loads(line) for line in ok(mem(source, "export")).splitlines()]
    facts = {r["id"]: r for r in rows if r["kind"] == "fact"}
    old = next(r for r in facts.values() if r["superseded_by"] is not None)
    new = facts[old["superseded_by"]]
    if shape == "loop":  # the correction is closed by the fact it corrected
        new["superseded_by"], new["invalid_at"] = old["id"], old["invalid_at"]
    else:  # a fact that corrects itself
        old["superseded_by"] = old["id"]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    _bad_import(target, text, "lead back to themselves")


def test_an_import_racing_another_into_the_same_new_bank_is_one_clear_error(
    source: Path, target: Path, embedder
):
    """Two imports into one new bank at once: the second failed with "database error:
    UNIQUE constraint failed: banks.name". The bank is checked again under the write lock."""
    dump = ok(mem(source, "export", "--with-vectors"))
    from memcli.models.load import load_embedder

    model = load_embedder("e5")  # the source bank's model (mem's default)

    def model_after_a_rival_import():
        # Between this import's first look and its write, another process makes the bank.
        with Store(target) as rival:
            with rival.atomic():
                rival.exchange.create_bank_row("same", "2026-01-01T00:00:00")
        return model

    with Store(target) as store:
        before = table_counts(target)
        with pytest.raises(LifecycleError, match="bank 'same' already exists"):
            exchange.import_lines(
                store,
                dump.splitlines(),
                name="dump",
                bank="same",
                embedder=model_after_a_rival_import,
            )
    assert table_counts(target)["facts"] == before["facts"]


def test_an_end_record_that_disagrees_with_the_file_is_damage(source: Path, target: Path) -> None:
    """An export whose end record said "facts": 99 imported as if whole."""
    lines = ok(mem(source, "export")).splitlines()
    end = json.loads(lines[-1])
    assert end["kind"] == "end"
    end["counts"]["facts"] = 99
    lines[-1] = json.dumps(end)
    _bad_import(target, "\n".join(lines) + "\n", "end record", "damaged")


def test_an_export_killed_midway_leaves_no_file_behind_the_next_one(source: Path, tmp_path):
    """kill -9 during `export -o` left a hidden temp file as big as the export beside it, and
    later exports to the same path left it there. A temp file whose writer is gone (no one
    holds its lock) is removed; one being written is not."""
    import fcntl

    folder = tmp_path / "exports"
    folder.mkdir()
    target = folder / "out.jsonl"
    abandoned = folder / ".out.jsonl.4242.deadbeef.tmp"
    abandoned.write_text("half an export")
    busy = folder / ".out.jsonl.4343.cafebabe.tmp"
    busy.write_text("being written")
    holder = os.open(busy, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # as a writer at work holds it
    try:
        ok(mem(source, "export", "-o", str(target)))
    finally:
        os.close(holder)
    assert not abandoned.exists() and busy.exists()
    assert sorted(p.name for p in folder.iterdir()) == sorted([busy.name, "out.jsonl"])


def test_an_import_never_gives_a_forgotten_fact_id_again(tmp_path: Path) -> None:
    """Import kept a file's ids where no fact used them now, or moved them past the largest
    in use: ids of forgotten facts were given to imported ones (review of schema 8)."""
    db = tmp_path / "reuse.db"
    for text in ("Alice likes tea.", "Bob likes coffee.", "Carol plays cello.", "Dan fixes bikes."):
        ok(mem(db, "retain", text))
    ok(mem(db, "forget", "3", "4", "--yes"))
    dump = tmp_path / "reuse.jsonl"
    ok(mem(db, "export", "-o", str(dump)))
    ok(mem(db, "import", str(dump), "--into", "copy"))
    copied = [
        json.loads(x)["id"]
        for x in ok(mem(db, "--bank", "copy", "list", "--format", "jsonl")).splitlines()
    ]
    assert min(copied) > 4, copied


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_name_like_a_temp_file_that_is_no_file_is_left_alone(source: Path, tmp_path, kind):
    """The sweep of abandoned temp files opened any matching name: a folder of that name
    failed the export ("Is a directory"), a fifo hung it."""
    folder = tmp_path / "exports"
    folder.mkdir()
    odd = folder / ".out.jsonl.123.abcdef12.tmp"
    if kind == "folder":
        odd.mkdir()
    else:
        os.mkfifo(odd)
    ok(mem(source, "export", "-o", str(folder / "out.jsonl")))
    assert odd.exists() and (folder / "out.jsonl").is_file()


@pytest.mark.parametrize(("fill", "named"), [(float("nan"), "not numbers"), (0.0, "zeros")])
def test_a_vector_with_no_direction_is_refused(source: Path, target: Path, fill, named) -> None:
    """A NaN or all-zero vector was imported: its fact was in no semantic search after,
    and doctor passed."""
    import base64
    import struct

    lines = ok(mem(source, "export", "--with-vectors")).splitlines(keepends=True)
    records = [json.loads(line) for line in lines]
    fact = next(r for r in records if r["kind"] == "fact")
    dim = len(base64.b64decode(fact["vector"])) // 4
    fact["vector"] = base64.b64encode(struct.pack(f"<{dim}f", *[fill] * dim)).decode()
    _bad_import(target, "".join(json.dumps(r) + "\n" for r in records), named)


def test_a_bank_without_facts_keeps_its_embedder_through_export_and_import(tmp_path: Path) -> None:
    """A bank whose facts were all forgotten exported its embedder, but the import left the
    new bank with none: its next retain chose another model, and re-exporting differed."""
    db, copy = tmp_path / "a.db", tmp_path / "b.db"
    ok(mem(db, "retain", "The spare key is under the blue pot."))
    ok(mem(db, "forget", "1", "--yes"))
    first = ok(mem(db, "export"))
    assert json.loads(first.splitlines()[0])["bank"]["embedder"]
    ok(mem(copy, "import", "-", input=first))
    assert ok(mem(copy, "export")) == first


def test_a_fact_id_given_twice_is_reported_at_its_line(source: Path, target: Path) -> None:
    """A duplicate fact id was reported at the end record's line ("UNIQUE constraint
    failed"), not at the duplicate's."""
    lines = ok(mem(source, "export")).splitlines(keepends=True)
    facts = [i for i, line in enumerate(lines) if json.loads(line)["kind"] == "fact"]
    first, second = (json.loads(lines[i]) for i in facts[:2])
    second["id"] = first["id"]
    lines[facts[1]] = json.dumps(second) + "\n"
    _bad_import(target, "".join(lines), f"line {facts[1] + 1}", f"has id {first['id']}")


def test_an_export_whose_bank_name_mem_now_refuses_says_how_to_import_it(tmp_path: Path) -> None:
    """An older mem's bank "x " (a trailing space, refused now) exported fine, and its
    import failed with "bad bank name 'x '" and no word of --into."""
    db = tmp_path / "a.db"
    ok(mem(db, "retain", "The spare key is under the blue pot."))
    dump = ok(mem(db, "export"))
    header, rest = dump.split("\n", 1)
    record = json.loads(header)
    record["bank"]["name"] = "x "
    old = json.dumps(record) + "\n" + rest
    one_line_error(mem(tmp_path / "b.db", "import", "-", input=old), "--into", "header")
    ok(mem(tmp_path / "b.db", "import", "-", "--into", "x", input=old))


class _WriterComesIn:
    """The real embedder, with another process's `mem retain` run at its first embed():
    what an agent's retain meets while a big import embeds (minutes for 10k facts)."""

    def __init__(self, model, db: Path) -> None:
        self.model, self.db, self.outcome = model, db, None

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def embed(self, texts):
        if self.outcome is None:
            env = {**os.environ, "MEM_BUSY_TIMEOUT_MS": "300"}
            self.outcome = subprocess.run(
                [sys.executable, "-m", "memcli", "--db", str(self.db), "retain",
                 "Written while an import embeds."],
                env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
        return self.model.embed(texts)


def test_an_import_lets_other_writers_in_while_it_embeds(source: Path, target: Path, embedder):
    """An import that computes vectors embeds before it takes the write lock: it held the
    lock through the embedding, and a retain beside it timed out ("the store is busy")."""
    dump = ok(mem(source, "export"))
    watching = _WriterComesIn(embedder, target)
    with Store(target) as store:
        report = exchange.import_lines(
            store, dump.splitlines(), name="dump", bank="copy", embedder=lambda: watching
        )
    assert watching.outcome is not None and watching.outcome.returncode == 0, (
        watching.outcome.stderr
    )
    assert report.embedded == report.counts["facts"] > 0
    with Store(target) as s:
        assert sorted(s.banks.bank_names()) == ["copy", "default", "other"]
        assert s.facts.fact_count() == 1 + 1 + report.counts["facts"]


@pytest.mark.parametrize("kind", ["document", "chunk", "entity"])
def test_an_id_given_twice_is_refused_at_its_line_before_any_embedding(
    source: Path, target: Path, embedder, kind: str
) -> None:
    """Found by the checks of the first pass, not by SQLite's UNIQUE constraint in the
    writing pass after every fact was embedded (minutes for a big file)."""
    lines = ok(mem(source, "export")).splitlines()
    first = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == kind)
    lines.insert(first + 1, lines[first])  # the copy is line first + 2
    loaded = []
    with Store(target) as store, pytest.raises(LifecycleError) as caught:
        exchange.import_lines(
            store, lines, name="dump", bank="copy", embedder=lambda: loaded.append(1) or embedder
        )
    assert str(caught.value).startswith(f"dump line {first + 2} ({kind}) has id "), caught.value
    assert f"as a {kind} record before it" in str(caught.value)
    assert loaded == []


@pytest.mark.parametrize("where", ["copy", "vectors"])
def test_a_full_temporary_folder_is_named_in_one_line(
    big_export: Path, target: Path, tmp_path: Path, where: str
) -> None:
    """A file without vectors is copied to a temporary file and its vectors kept in
    another: a full disk there said only "File too large" (the failed write was retried by
    close(), or made by a seek outside the handler)."""
    import resource

    # Without its links the file is smaller than its vectors (300 x 1.5 KB): a limit can
    # stop the vectors' file and not the copy.
    records = [json.loads(line) for line in big_export.read_text().splitlines()]
    for rec in records:
        if rec["kind"] in ("header", "end"):
            rec["counts"]["links"] = 0
    dump = tmp_path / "no-links.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in records if r["kind"] != "link"))
    size, vectors = dump.stat().st_size, 300 * 384 * 4
    assert size + 16384 < vectors
    limit = size // 2 if where == "copy" else size + 16384
    before = table_counts(target)
    proc = subprocess.run(
        [sys.executable, "-m", "memcli", "--db", str(target), "import", str(dump),
         "--into", "copy"],
        capture_output=True, text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr.strip()
    assert "\n" not in err and err.startswith("mem: error: "), err
    assert "a temporary file (File too large" in err and err.endswith("nothing imported"), err
    assert table_counts(target) == before


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"a\nb\n", ["a\n", "b\n"]),
        (b"a\r\nb\r\n", ["a\n", "b\n"]),
        (b"a\rb\rc", ["a\n", "b\n", "c"]),
        (b"a\n\nb", ["a\n", "\n", "b"]),
        ('{"t":"x\u2028y"}\n'.encode(), ['{"t":"x\u2028y"}\n']),
        (b"", []),
    ],
)
def test_utf8_lines_split_as_text_mode_does(data: bytes, lines: list[str]) -> None:
    import io

    assert list(exchange.utf8_lines(io.BytesIO(data), "f")) == lines


@pytest.mark.parametrize(
    ("data", "where"),
    [(b"ok\nbad \xff\n", "line 2 is not UTF-8 text (bad byte at column 5)"),
     (b"a\rb\r\xfe\n", "line 3 is not UTF-8 text (bad byte at column 1)"),
     (b"a\r\nb\xc3\n", "line 2 is not UTF-8 text (bad byte at column 2)")],
)  # fmt: skip
def test_utf8_lines_name_a_bad_byte_at_its_line_and_column(data: bytes, where: str) -> None:
    import io

    with pytest.raises(LifecycleError, match=f"^f {re.escape(where)}; nothing imported$"):
        list(exchange.utf8_lines(io.BytesIO(data), "f"))


def test_a_bank_moved_to_another_store_never_gives_its_forgotten_ids_again(tmp_path: Path):
    """The export did not carry the highest fact id ever given: imported into a new store,
    the forgotten fact 3's id went to the next memory retained there, and an agent that
    kept id 3 would show or forget that one."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for text in ("Apples are red.", "Pears are green.", "Plums are purple."):
        ok(mem(a, "retain", text))
    ok(mem(a, "forget", "3", "--yes"))
    dump = tmp_path / "a.jsonl"
    ok(mem(a, "export", "-o", str(dump)))
    ok(mem(b, "import", str(dump)))
    stored = json.loads(ok(mem(b, "retain", "--json", "My PIN is 4321.")))["stored"]
    assert stored[0]["id"] == 4
    # The round trip still gives the same bytes, and a file without the mark still imports.
    again = tmp_path / "again.db"
    ok(mem(again, "import", str(dump)))
    assert ok(mem(again, "export")) == dump.read_text()
    header = json.loads(dump.read_text().splitlines()[0])
    assert header["fact_id_high"] == 3
    old = dict(header)
    del old["fact_id_high"]
    lines = dump.read_text().splitlines()
    ok(mem(tmp_path / "c.db", "import", "-", input="\n".join([json.dumps(old), *lines[1:]])))


def test_imports_into_the_same_store_do_not_inflate_its_ids(tmp_path: Path) -> None:
    """fact_id_high was kept past with the shift added: each export/import round into the
    same store doubled the next fact id (review). A renumbered bank's ids are new ones, so
    only an import that keeps the file's ids keeps its high mark."""
    db = tmp_path / "x.db"
    ok(mem(db, "--bank", "a", "retain", "Alice likes tea."))
    rows = [{"text": f"fact {i} number"} for i in range(30)]
    ok(mem(db, "--bank", "b", "retain", "--jsonl", str(write_jsonl(tmp_path / "m.jsonl", rows))))
    for i in range(3):
        dump = tmp_path / f"a{i}.jsonl"
        ok(mem(db, "export", "--bank", "a", "-o", str(dump)))
        ok(mem(db, "import", str(dump), "--into", f"a{i}"))
    stored = json.loads(ok(mem(db, "--bank", "a", "retain", "--json", "Bob likes coffee.")))
    assert stored["stored"][0]["id"] == 35, stored  # 31 + the three copies' one fact each


def _moved_to(rows: list[dict], top: int) -> list[dict]:
    """The rows of an export with every fact id moved so that the last one is `top`."""
    rows = [dict(r) for r in rows if r["kind"] != "link"]
    rows[0]["counts"]["links"] = rows[-1]["counts"]["links"] = 0
    lo, hi = rows[0]["ids"]["facts"]
    by = top - hi
    for r in rows:
        if r["kind"] == "fact":
            r["id"] += by
            if r["superseded_by"] is not None:
                r["superseded_by"] += by
    rows[0]["ids"]["facts"] = [lo + by, top]
    return rows


@pytest.mark.parametrize(
    "how",
    ["ids end at the largest integer", "fact_id_high at the largest integer", "high one below"],
)
def test_an_import_file_cannot_stop_the_store_taking_new_facts(
    source: Path, tmp_path: Path, how: str
) -> None:
    """Issue 30, finding 2. Before: a file whose fact ids ended at 2^63 - 1 (or whose
    fact_id_high said so) imported, and every later retain and import into any bank failed
    with "datatype mismatch"; deleting the bank did not help, and doctor passed. Ids in a
    file are bounded (2^53 - 1, what JSON readers hold exactly) and refused beyond."""
    top = 2**63 - 1
    rows = [json.loads(line) for line in ok(mem(source, "export")).splitlines()]
    if how == "ids end at the largest integer":
        rows = _moved_to(rows, top)
    else:
        rows[0]["fact_id_high"] = top if how.startswith("fact_id_high") else top - 1
    db = tmp_path / "fresh.db"
    ok(mem(db, "--bank", "other", "retain", "Something already stored."))
    _bad_import(db, "".join(json.dumps(r) + "\n" for r in rows), "too large")
    ok(mem(db, "retain", "The store still takes new facts."))
    ok(mem(db, "--bank", "third", "retain", "And in another bank."))


def test_ids_up_to_the_bound_import_and_the_store_goes_on(source: Path, tmp_path: Path) -> None:
    """The largest ids a file may carry import as they are, and new facts follow them."""
    limit = 2**53 - 1
    rows = _moved_to([json.loads(line) for line in ok(mem(source, "export")).splitlines()], limit)
    db = tmp_path / "fresh.db"
    ok(mem(db, "import", "-", input="".join(json.dumps(r) + "\n" for r in rows)))
    out = ok(mem(db, "retain", "--json", "A new fact after the imported ones."))
    assert json.loads(out)["stored"][0]["id"] == limit + 1
    assert ok(mem(db, "doctor")).count("fail") == 0


def test_doctor_finds_a_store_near_the_id_limit(tmp_path: Path) -> None:
    """A store whose ids were pushed near 2^63 - 1 (by an older mem's import) fails the
    doctor's id check, naming how many ids are left."""
    db = tmp_path / "near.db"
    ok(mem(db, "retain", "A fact."))
    with Store(db) as s, s.atomic():
        s.exchange.keep_fact_ids_past(2**63 - 10)  # as an import of such ids keeps them
    result = mem(db, "doctor")
    assert result.exit_code == 1
    assert "ids" in result.stdout and "left" in result.stdout, result.stdout
