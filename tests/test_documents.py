"""Documents and dedupe as a store grows and changes (issue 7, findings 1-4): re-retaining a
document replaces it whole and atomically, a sentence two documents share belongs to both,
and the same words at another time are a new memory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import apsw
import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.retain import Retainer, RetainItem
from memcli.settings import RetainSettings
from memcli.store import Store
from tests.conftest import write_jsonl

runner = CliRunner()


def mem(db: Path, *args: str, input: str | None = None):
    return runner.invoke(app, ["--db", str(db), *args], input=input)


def texts_of(db: Path, document: str | None = None) -> list[str]:
    with Store(db) as s:
        bank = s.banks.require_bank("default")
        if document is None:
            ids = s.facts.fact_ids_of_bank(bank)
        else:
            row = s.documents.document_row(bank, document)
            ids = s.documents.document_fact_ids(row) if row else []
        facts = s.facts.facts_by_id(ids, bank)
        return sorted(f.text for f in facts.values())


def hidden_rows(db: Path) -> int:
    """Rows of staging banks (a retain call's unpublished documents)."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute(
            "SELECT (SELECT count(*) FROM banks WHERE kind = 'staging') + "
            "(SELECT count(*) FROM facts f JOIN banks b ON b.id = f.bank_id "
            "WHERE b.kind = 'staging')"
        ).fetchone()[0]
    finally:
        conn.close()


def test_re_retaining_a_changed_document_replaces_it(db_path):
    # Finding 1: this sequence crashed with FOREIGN KEY constraint failed in add_links.
    assert mem(db_path, "retain", "Lunch is at noon on Fridays.", "--document", "d1").exit_code == 0
    assert mem(db_path, "retain", "Parking is on level two.").exit_code == 0
    r = mem(db_path, "retain", "Lunch is at one on Fridays.", "--document", "d1")
    assert r.exit_code == 0, r.stderr
    assert "1 documents replaced" in r.stderr
    assert texts_of(db_path) == ["Lunch is at one on Fridays.", "Parking is on level two."]
    r = mem(db_path, "recall", "When is lunch?", "--format", "json")
    assert "Lunch is at noon on Fridays." not in r.stdout


def test_jsonl_imports_sharing_document_ids_replace_or_append(db_path, tmp_path):
    def turns(start: int, n: int) -> list[dict]:
        return [
            {
                "id": f"t{i}",
                "text": f"Turn {i}: we talked about topic number {i}.",
                "timestamp": f"2026-03-01T10:{i % 60:02d}:00Z",
                "document_id": "chat",
                "context": "Ana" if i % 2 else "Ben",
            }
            for i in range(start, start + n)
        ]

    first = write_jsonl(tmp_path / "a.jsonl", turns(0, 80))
    second = write_jsonl(tmp_path / "b.jsonl", turns(80, 70))
    assert mem(db_path, "retain", "--jsonl", str(first)).exit_code == 0
    # A conversation log imported in several files: --append adds to the document.
    r = mem(db_path, "retain", "--jsonl", str(second), "--append")
    assert r.exit_code == 0, r.stderr
    assert len(texts_of(db_path, "chat")) == 150
    # Without --append the later file is the document's new version (this crashed before).
    r = mem(db_path, "retain", "--jsonl", str(second))
    assert r.exit_code == 0, r.stderr
    assert len(texts_of(db_path, "chat")) == 70 and hidden_rows(db_path) == 0


def test_one_retain_call_builds_a_document_across_batches_in_any_order(store, embedder):
    items = [
        RetainItem(f"Line {i} of the manual.", document_id="a" if i % 3 else "b")
        for i in range(150)
    ]
    Retainer(store, "default", embedder).retain(items)
    bank = store.banks.require_bank("default")
    assert len(store.documents.document_fact_ids(store.documents.document_row(bank, "a"))) == 100
    assert len(store.documents.document_fact_ids(store.documents.document_row(bank, "b"))) == 50


def test_a_shared_sentence_belongs_to_each_document(db_path):
    # Finding 3: dedupe was bank-wide, so replacing A deleted B's copy and a plain retain.
    shared = "The wifi password is on the fridge."
    at = ["--at", "2026-04-01T09:00:00"]
    both = f'{{"text": "{shared}"}}\n{{"text": "Rent is due on the 1st."}}\n'
    assert mem(db_path, "retain", "--document", "A", *at, "--jsonl", "-", input=both).exit_code == 0
    mem(db_path, "retain", shared, "--document", "B", *at)
    mem(db_path, "retain", shared, *at)
    assert texts_of(db_path).count(shared) == 3
    mem(db_path, "retain", "Rent is due on the 1st.", "--document", "A", *at)
    assert texts_of(db_path, "B") == [shared]
    assert texts_of(db_path).count(shared) == 2
    # Within one document identical content is stored once.
    r = mem(
        db_path,
        "retain",
        "--document",
        "B",
        *at,
        "--jsonl",
        "-",
        input=f'{{"text": "{shared}"}}\n{{"text": "{shared}"}}\n',
    )
    assert r.exit_code == 0 and "1 duplicates skipped" in r.stderr


def test_the_same_words_on_another_day_are_a_new_memory(db_path):
    # Finding 4: a recurring event was dropped as a duplicate.
    run = "Went for a run along the river."
    assert mem(db_path, "retain", run, "--at", "2026-05-01").exit_code == 0
    r = mem(db_path, "retain", run, "--at", "2026-05-08")
    assert r.exit_code == 0 and "1 facts stored" in r.stderr
    r = mem(db_path, "retain", run, "--at", "2026-05-08")
    assert "1 duplicates skipped" in r.stderr
    assert texts_of(db_path) == [run, run]


# -- atomic replace: kill -9, Ctrl-C, two at once -------------------------------------------


def _doc_jsonl(path: Path, version: str, n: int) -> Path:
    return write_jsonl(
        path,
        [
            {
                "id": f"{version}-{i}",
                "text": f"Version {version} says item {i} is ready.",
                "document_id": "big",
                "timestamp": "2026-02-01T12:00:00Z",
            }
            for i in range(n)
        ],
    )


def _start_import(db: Path, jsonl: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "memcli", "--db", str(db), "retain", "--jsonl", str(jsonl)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # The child gets default SIGINT handling, as at a terminal.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for_staged_rows(db: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the import ended before it could be interrupted: {proc.stderr.read()}")
        try:
            if hidden_rows(db) > 64:
                return
        except apsw.Error:
            pass
        time.sleep(0.05)
    pytest.fail("no staged rows appeared")


def _versions(db: Path) -> set[str]:
    return {t.split()[1] for t in texts_of(db, "big")}


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_an_interrupted_replace_leaves_the_old_version_whole(db_path, tmp_path, sig):
    assert mem(db_path, "retain", "--jsonl", str(_doc_jsonl(tmp_path / "v1", "one", 300)))
    assert len(texts_of(db_path, "big")) == 300
    proc = _start_import(db_path, _doc_jsonl(tmp_path / "v2", "two", 640))
    _wait_for_staged_rows(db_path, proc)
    os.kill(proc.pid, sig)
    proc.wait(60)
    assert proc.returncode == (-9 if sig == signal.SIGKILL else 130), proc.stderr.read()
    assert _versions(db_path) == {"one"} and len(texts_of(db_path, "big")) == 300
    if sig == signal.SIGINT:
        assert hidden_rows(db_path) == 0  # Ctrl-C drops what it staged
    # The next writer purges what a killed import left behind.
    assert mem(db_path, "retain", "Something else.").exit_code == 0
    assert hidden_rows(db_path) == 0
    with Store(db_path) as s:
        assert s.health.index_counts() == {"facts": 301, "fts_rows": 301, "vectors": 301}
        assert s.facts.fact_count() == 301


def _entity_records(db: Path) -> list[dict]:
    out = mem(db, "export")
    assert out.exit_code == 0, out.output
    records = [json.loads(line) for line in out.stdout.splitlines()]
    header = records[0]
    entities = [r for r in records if r["kind"] == "entity"]
    assert header["counts"]["entities"] == len(entities)
    return sorted((r["name"], r["mention_count"]) for r in entities)


def test_an_export_beside_a_killed_replace_holds_only_the_live_bank(db_path, tmp_path):
    """A replace's staged facts mention the live bank's entities (and add new ones there)
    until it publishes. Killed, they stay until the next writer purges them; an export
    (which only reads) before that carried the staged entities and mention counts."""
    rows = [
        {"id": f"a-{i}", "text": f"Maya Lindqvist checked item {i}.", "document_id": "big"}
        for i in range(40)
    ]
    assert mem(db_path, "retain", "--jsonl", str(write_jsonl(tmp_path / "v1", rows))).exit_code == 0
    before = _entity_records(db_path)
    assert ("Maya Lindqvist", 40) in before
    staged = [
        {
            "id": f"b-{i}",
            "text": f"Maya Lindqvist and Oskar Brandt{i} reviewed item {i}.",
            "document_id": "big",
        }
        for i in range(640)
    ]
    proc = _start_import(db_path, write_jsonl(tmp_path / "v2", staged))
    _wait_for_staged_rows(db_path, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(60)
    assert hidden_rows(db_path) > 0  # the killed import's rows are still in the file
    assert _entity_records(db_path) == before


def test_two_replaces_of_one_document_at_once_leave_one_version_whole(db_path, tmp_path):
    assert mem(db_path, "retain", "--jsonl", str(_doc_jsonl(tmp_path / "v1", "one", 50)))
    a = _start_import(db_path, _doc_jsonl(tmp_path / "v2", "two", 200))
    b = _start_import(db_path, _doc_jsonl(tmp_path / "v3", "three", 150))
    for proc in (a, b):
        proc.wait(300)
        assert proc.returncode == 0, proc.stderr.read()
    versions = _versions(db_path)
    assert versions in ({"two"}, {"three"})
    assert len(texts_of(db_path, "big")) == (200 if versions == {"two"} else 150)
    assert hidden_rows(db_path) == 0


def test_an_interrupted_call_counts_only_what_it_keeps(store, embedder):
    """Cut short after two batches: the plain items committed stay and are counted; the
    staged document is dropped and not counted ("kept N items" must be true)."""
    from memcli.settings import RetainSettings

    items = [RetainItem(text=f"Plain note {i} about the garden shed.") for i in range(3)]
    items += [
        RetainItem(text=f"Chapter line {i} of the manual.", document_id="manual") for i in range(5)
    ]
    batches = 0

    def progress(n: int) -> None:
        nonlocal batches
        batches += 1
        if batches == 2:
            raise KeyboardInterrupt

    retainer = Retainer(
        store,
        "default",
        embedder,
        now=datetime(2026, 11, 20),
        settings=RetainSettings(batch_items=3),
    )
    summary = retainer.retain(items, progress=progress)
    assert summary.interrupted
    bank = store.banks.require_bank("default")
    assert store.facts.fact_count(bank) == 3
    assert (summary.items, summary.facts) == (3, 3)
    assert summary.line().startswith("interrupted: kept 3 items, 3 facts stored")


def test_an_interrupted_call_counts_only_the_entities_and_links_it_keeps(store, embedder):
    """The staged document dropped at Ctrl-C takes its entities and links with it: the
    summary's entity and link counts are what the store keeps."""
    from memcli.settings import RetainSettings

    items = [RetainItem(text=f"Maya watered the garden on day {i}.") for i in range(3)]
    items += [
        RetainItem(text=f"Priya wrote chapter {i} of the Lisbon guide.", document_id="guide")
        for i in range(5)
    ]
    batches = 0

    def progress(n: int) -> None:
        nonlocal batches
        batches += 1
        if batches == 2:
            raise KeyboardInterrupt

    retainer = Retainer(
        store,
        "default",
        embedder,
        now=datetime(2026, 11, 20),
        settings=RetainSettings(batch_items=3),
    )
    summary = retainer.retain(items, progress=progress)
    assert summary.interrupted and store.facts.fact_count(store.banks.require_bank("default")) == 3
    kept_entities = store.health.row_counts()["entities"]
    assert (summary.entities, summary.links) == (kept_entities, store.links.link_count())


def test_a_replace_committed_while_recall_reads_is_not_mixed_in(db_path, embedder, monkeypatch):
    """The arms read on two connections; a replace swapped in by another connection between
    them (here: right after the keyword arm read the old version) must not leave the result
    with the old version's hits and the new version's facts. Recall sees the commit and
    reads again, so every hit it reports is a fact of one state: the new one."""
    from memcli.recall import keyword, pipeline
    from memcli.recall.types import RecallOptions

    old = [
        RetainItem(f"The lighthouse keeper logs storm {i} in the old ledger.", document_id="lh")
        for i in range(4)
    ]
    new = [
        RetainItem(f"The lighthouse keeper logs gale {i} in the new ledger.", document_id="lh")
        for i in range(4)
    ]
    with Store(db_path) as store:
        Retainer(store, "default", embedder).retain(old)
    real_run = keyword.run
    swaps = []

    def keyword_then_a_replace(ctx):
        hits = real_run(ctx)
        if not swaps:  # another process swaps the new version in, once
            with Store(db_path) as other:
                Retainer(other, "default", embedder).retain(new)
            swaps.append(True)
        return hits

    monkeypatch.setattr(keyword, "run", keyword_then_a_replace)
    with Store(db_path) as store:
        result = pipeline.recall(
            store, "default", "lighthouse keeper ledger", RecallOptions(), embedder=embedder
        )
        live = {f.id for f in store.facts.facts_by_id(range(1, 100)).values()}
    assert swaps
    texts = [c.fact.text for c in result.results]
    assert texts and all("new ledger" in t for t in texts), texts
    for name, arm in result.arms.items():
        assert {h.fact_id for h in arm.hits} <= live, name  # no hit from the old version
    assert len(result.arms["keyword"].hits) == 4


def test_append_without_any_document_is_a_usage_error(db_path, tmp_path):
    """--append adds to documents; with no document id it did nothing, silently."""
    r = mem(db_path, "retain", "--append", "A note with no document.")
    assert r.exit_code == 2 and "--append" in r.stderr and "--document" in r.stderr
    assert not db_path.exists()
    rows = write_jsonl(tmp_path / "plain.jsonl", [{"text": "No document here either."}])
    assert mem(db_path, "retain", "--jsonl", str(rows), "--append").exit_code == 2
    assert not db_path.exists()
    # One line of a log without its document: named, and nothing is stored.
    mixed = write_jsonl(
        tmp_path / "mixed.jsonl",
        [{"text": "Turn one.", "document_id": "log"}, {"text": "A stray line."}],
    )
    r = mem(db_path, "retain", "--jsonl", str(mixed), "--append")
    assert r.exit_code == 2 and "item 2" in r.stderr
    assert not db_path.exists()


def _current_and_closed(db: Path) -> tuple[list[str], dict[str, str | None]]:
    """(texts of the valid facts, text of each closed fact -> its successor's text)."""
    with Store(db) as s:
        bank = s.banks.require_bank("default")
        facts = s.facts.facts_by_id(s.facts.fact_ids_of_bank(bank), bank)
    valid = sorted(f.text for f in facts.values() if f.invalid_at is None)
    closed = {
        f.text: facts[f.superseded_by].text if f.superseded_by in facts else None
        for f in facts.values()
        if f.invalid_at is not None
    }
    return valid, closed


def test_a_replace_that_drops_a_correction_makes_the_corrected_fact_valid_again(db_path):
    """Before: the correction went with the old version, and the fact it had closed stayed
    closed with no successor: "Maya lives in Berlin" was in no list and no recall. A forget
    of the correction reopened it; a replace now does the same."""
    assert mem(db_path, "retain", "Maya lives in Berlin.").exit_code == 0
    r = mem(db_path, "retain", "Maya lives in Munich.", "--document", "notes", "--supersedes", "1")
    assert r.exit_code == 0, r.output
    assert _current_and_closed(db_path) == (
        ["Maya lives in Munich."],
        {"Maya lives in Berlin.": "Maya lives in Munich."},
    )
    assert mem(db_path, "retain", "Shopping list: milk.", "--document", "notes").exit_code == 0
    assert _current_and_closed(db_path) == (
        ["Maya lives in Berlin.", "Shopping list: milk."],
        {},
    )
    assert "Maya lives in Berlin." in mem(db_path, "list").stdout


def test_a_replace_that_keeps_a_correction_keeps_it_correcting(db_path, tmp_path):
    """The same words at the same time in the new version are the same correction: the fact
    it closed stays closed, now by the new version's fact."""
    assert mem(db_path, "retain", "Maya lives in Berlin.").exit_code == 0
    at = "2026-03-01T10:00:00"
    r = mem(
        db_path, "retain", "Maya lives in Munich.", "--document", "notes", "--at", at,
        "--supersedes", "1",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    lines = [
        {"text": "Maya lives in Munich.", "document_id": "notes", "timestamp": at},
        {"text": "Shopping list: milk.", "document_id": "notes", "timestamp": at},
    ]
    r = mem(db_path, "retain", "--jsonl", str(write_jsonl(tmp_path / "v2.jsonl", lines)))
    assert r.exit_code == 0, r.output
    valid, closed = _current_and_closed(db_path)
    assert valid == ["Maya lives in Munich.", "Shopping list: milk."]
    assert closed == {"Maya lives in Berlin.": "Maya lives in Munich."}
    # Retained again at another time (review finding: only the very same time matched).
    r = mem(db_path, "retain", "Maya lives in Munich.", "--document", "notes")
    assert r.exit_code == 0, r.output
    assert _current_and_closed(db_path) == (
        ["Maya lives in Munich."],
        {"Maya lives in Berlin.": "Maya lives in Munich."},
    )


def test_a_correction_made_to_a_document_survives_its_retain_again(db_path):
    """`mem correct` of a document's fact, then the document retained again with that fact
    unchanged: the correction still holds (review finding: both versions were current)."""
    r = mem(db_path, "retain", "The team meeting is on Monday.", "--document", "notes",
            "--at", "2026-11-01T10:00:00")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert mem(db_path, "correct", "1", "The team meeting is on Tuesday.").exit_code == 0
    assert (
        mem(db_path, "retain", "The team meeting is on Monday.", "--document", "notes").exit_code
        == 0
    )
    valid, closed = _current_and_closed(db_path)
    assert valid == ["The team meeting is on Tuesday."]
    assert closed == {"The team meeting is on Monday.": "The team meeting is on Tuesday."}


def test_a_live_import_whose_process_id_means_nothing_here_is_not_purged(db_path, monkeypatch):
    """A document import in another PID namespace (a container sharing the store's folder)
    had its staging bank dropped by a writer here, which saw its process id not running:
    the import then failed with "FOREIGN KEY constraint failed". Its owner holds a lock on
    a file beside the store; only a staging bank whose lock nobody holds is abandoned."""
    import memcli.store.banks as banks_mod

    elsewhere = 4_194_303  # a process id no process here has
    importer = Store(db_path)
    writer = Store(db_path)
    try:
        bank = importer.banks.ensure_bank("default", datetime(2026, 1, 1))
        monkeypatch.setattr(banks_mod.os, "getpid", lambda: elsewhere)
        with importer.atomic():
            staging = importer.banks.create_staging_bank(bank, datetime(2026, 1, 1))
        monkeypatch.undo()
        lock_files = list(db_path.parent.glob(f".{db_path.name}.staging-{elsewhere}-*.lock"))
        assert len(lock_files) == 1
        with writer.atomic():
            assert writer.documents.purge_abandoned_staging() == 0  # its owner holds the lock
        # The importer is killed: its lock goes with it (the file stays).
        fd, _ = importer.banks._staging_locks.pop(staging)
        os.close(fd)
        with writer.atomic():
            assert writer.documents.purge_abandoned_staging() == 1
        assert not lock_files[0].exists()
    finally:
        importer.close()
        writer.close()


def test_a_lock_file_of_an_importer_killed_before_its_first_commit_is_removed(db_path):
    """kill -9 inside the first write of a document import left its lock file beside the
    store for good: no staging bank row names it, so nothing removed it."""
    import fcntl

    assert runner.invoke(app, ["--db", str(db_path), "retain", "seed"]).exit_code == 0
    orphan = db_path.with_name(f".{db_path.name}.staging-4242-deadbeef.lock")
    orphan.write_text("")
    live = db_path.with_name(f".{db_path.name}.staging-4343-cafebabe.lock")
    live.write_text("")
    holder = os.open(live, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # an importer at work, its row not committed yet
    try:
        out = runner.invoke(
            app, ["--db", str(db_path), "retain", "--document", "d1", "Bob lives in Rome."]
        )
        assert out.exit_code == 0, out.output
    finally:
        os.close(holder)
    assert not orphan.exists() and live.exists()
    assert not list(db_path.parent.glob(f".{db_path.name}.staging-{os.getpid()}-*.lock"))


def _people_items(n: int) -> list[RetainItem]:
    names = ["Caroline", "Melanie", "Jon", "Gina", "Tim"]
    return [
        RetainItem(
            f"{names[i % 5]} talked about painting number {i} at the lake house.",
            document_id="conv",
        )
        for i in range(n)
    ]


def test_a_bank_renamed_while_a_retain_writes_into_it_gets_the_whole_retain(db_path, embedder):
    """`banks --rename work job` beside a running document retain into work: the later
    batches went to a new bank named work, with entity ids of job, an export that its own
    import refused, and doctor saw nothing. A renamed bank is the same bank."""
    with Store(db_path) as store:
        Retainer(store, "work", embedder).retain([RetainItem("A placeholder note.")])
    renamed = []

    def rename_after_the_first_batch(done: int) -> None:
        if not renamed:
            with Store(db_path) as other, other.atomic():
                other.banks.rename_bank(other.banks.require_bank("work"), "job")
            renamed.append(done)

    with Store(db_path) as store:
        retainer = Retainer(store, "work", embedder, settings=RetainSettings(batch_items=4))
        retainer.retain(_people_items(12), rename_after_the_first_batch)
    assert renamed
    with Store(db_path) as store:
        assert store.banks.bank_names() == ["job"]
        job = store.banks.require_bank("job")
        assert len(store.facts.fact_ids_of_bank(job)) == 13
    out = runner.invoke(app, ["--db", str(db_path), "doctor"])
    assert out.exit_code == 0, out.output
    dump = db_path.with_name("job.jsonl")
    assert mem(db_path, "--bank", "job", "export", "-o", str(dump)).exit_code == 0
    copy = db_path.with_name("copy.db")
    out = runner.invoke(app, ["--db", str(copy), "import", str(dump)])
    assert out.exit_code == 0, out.output


def test_a_bank_deleted_while_a_retain_writes_into_it_stops_the_retain(db_path, embedder):
    """`banks --delete work` beside a running document retain into work: the retain went on
    into a new bank of that name whose facts had lost their entities."""
    from memcli.store import StoreError

    with Store(db_path) as store:
        Retainer(store, "work", embedder).retain([RetainItem("A placeholder note.")])
    deleted = []

    def delete_after_the_first_batch(done: int) -> None:
        if not deleted:
            with Store(db_path) as other, other.atomic():
                other.banks.delete_bank(other.banks.require_bank("work"))
            deleted.append(done)

    with Store(db_path) as store:
        retainer = Retainer(store, "work", embedder, settings=RetainSettings(batch_items=4))
        with pytest.raises(StoreError, match="deleted"):
            retainer.retain(_people_items(12), delete_after_the_first_batch)
    with Store(db_path) as store:
        assert store.banks.bank_names() == []
        assert store.facts.fact_count() == 0
    assert hidden_rows(db_path) == 0
