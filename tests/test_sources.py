"""Folders of notes and other tools' histories (issue 34): `mem retain --file` of the same
file is one memory, Markdown is read as Markdown, `mem sync` keeps a bank in step with a
folder (exactly, killed or not, never forgetting what it did not make), and `mem import
--from` reads ChatGPT, Claude, mem0, the MCP memory server and plain JSONL. Every sample
file is built here in the shape its tool writes (no one's data is copied)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import numpy as np
import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.store import Store

runner = CliRunner()
MEM = str(Path(sys.executable).with_name("mem"))


def mem(db: Path, *args: str, input: str | None = None):
    return runner.invoke(app, ["--db", str(db), *args], input=input)


def ok(r) -> str:
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    return r.stdout


def one_error_line(r, *needles: str) -> str:
    assert r.exit_code == 1, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mem: error: "), r.stderr
    for needle in needles:
        assert needle in lines[0], r.stderr
    return lines[0]


def facts(db: Path) -> list[dict]:
    return [json.loads(line) for line in ok(mem(db, "list", "--format", "jsonl")).splitlines()]


def documents(db: Path) -> dict[str, list[str]]:
    """Each document of the default bank -> its facts' texts, sorted (the store's contents
    as a sync should leave them)."""
    out: dict[str, list[str]] = {}
    for f in facts(db):
        out.setdefault(f["document_id"], []).append(f["text"])
    return {k: sorted(v) for k, v in out.items()}


def staging_rows(db: Path) -> int:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute(
            "SELECT (SELECT count(*) FROM banks WHERE kind = 'staging') + (SELECT count(*) "
            "FROM facts f JOIN banks b ON b.id = f.bank_id WHERE b.kind = 'staging')"
        ).fetchone()[0]
    finally:
        conn.close()


# -- the findings: one file is one memory, Markdown is Markdown ---------------------------

NOTE = """---
title: Trip
tags: [travel, "#lisbon"]
date: 2026-03-21
aliases: [Lisbon trip]
---
# Lisbon
Maya flies out on May 9 and stays with [[Priya Sharma|Priya]].

## Packing
- passport
- charger

```sh
make deploy
   indented line
```

| day | plan |
|-----|------|
| May 9 | fly |
"""


def test_retaining_the_same_file_again_is_no_new_memory_and_an_edit_replaces_it(db_path, tmp_path):
    """Before: the same file twice stored every fact twice (recall returned both), and after
    an edit the old and the new version both stayed."""
    note = tmp_path / "vault" / "sub" / "priya.md"
    note.parent.mkdir(parents=True)
    note.write_text("Priya moved to Porto in 2025.\n")
    ok(mem(db_path, "retain", "--file", str(note)))
    r = mem(db_path, "retain", "--file", str(note))
    ok(r)
    assert "as it was retained: skipped" in r.stderr
    assert [f["text"] for f in facts(db_path)] == ["Priya moved to Porto in 2025."]
    out = ok(mem(db_path, "recall", "Where does Priya live?", "--format", "json"))
    assert len(json.loads(out)["results"]) == 1
    note.write_text("Priya moved to Braga in 2026.\n")
    r = mem(db_path, "retain", "--file", str(note))
    ok(r)
    assert "1 document replaced" in r.stderr
    assert [f["text"] for f in facts(db_path)] == ["Priya moved to Braga in 2026."]
    # its path is its document (from anywhere), unless --document says otherwise
    assert facts(db_path)[0]["document_id"] == str(note.resolve())
    ok(mem(db_path, "retain", "--file", str(note), "--document", "priya"))
    assert sorted(f["document_id"] for f in facts(db_path)) == sorted(
        ["priya", str(note.resolve())]
    )
    # two files given one --document are one document, skipped only when both are as they were
    other = tmp_path / "porto.txt"
    other.write_text("Porto has the best custard tarts.\n")
    args = ("retain", "--file", str(note), "--file", str(other), "--document", "both")
    ok(mem(db_path, *args))
    assert "as it was retained: skipped" in mem(db_path, *args).stderr
    other.write_text("Porto has the best bookshops.\n")
    assert "1 document replaced" in mem(db_path, *args).stderr
    assert documents(db_path)["both"] == [
        "Porto has the best bookshops.",
        "Priya moved to Braga in 2026.",
    ]


def test_a_folder_given_to_retain_names_sync(db_path, tmp_path):
    """Before: `--file vault` failed with "Is a directory" and no way to keep it in step."""
    (tmp_path / "vault").mkdir()
    one_error_line(mem(db_path, "retain", "--file", str(tmp_path / "vault")), "mem sync")


def test_markdown_is_read_as_markdown(db_path, tmp_path):
    """Before: front matter and headings became part of facts ("--- title: Trip tags:
    [travel] --- # Lisbon Maya flies..."), which invented the entity "Lisbon Maya", and
    front-matter tags and dates were ignored."""
    note = tmp_path / "trip.md"
    note.write_text(NOTE)
    ok(mem(db_path, "retain", "--file", str(note)))
    stored = {f["text"]: f for f in facts(db_path)}
    assert set(stored) == {
        "Maya flies out on May 9 and stays with Priya.",
        "- passport\n- charger",
        "```sh\nmake deploy\n   indented line\n```",  # a code block whole, as written
        "| day | plan |\n|-----|------|\n| May 9 | fly |",  # a table whole
    }
    for f in stored.values():
        assert f["context"] == "Trip"  # the note's title
        assert f["tags"] == ["travel", "lisbon"]
        assert f["mentioned_at"].startswith("2026-03-2")  # the front matter's date
        assert f["metadata"]["aliases"] == ["Lisbon trip"]
        assert "Lisbon Maya" not in f["entities"]
    said = stored["Maya flies out on May 9 and stays with Priya."]
    assert said["metadata"]["section"] == "Lisbon"
    assert "Priya Sharma" in said["entities"] and "Maya" in said["entities"]
    assert stored["- passport\n- charger"]["metadata"]["section"] == "Lisbon > Packing"
    # the section is shown by `show`, apart from the text
    shown = ok(mem(db_path, "show", str(said["id"])))
    assert "section:   Lisbon" in shown and "text:      Maya flies out" in shown
    # and searchable: the heading's words find the list under it
    out = ok(mem(db_path, "recall", "Packing", "--arms", "keyword", "--format", "json"))
    assert json.loads(out)["results"][0]["text"] == "- passport\n- charger"


def test_reembedding_rebuilds_a_sections_embedding(db_path, tmp_path):
    """A fact's section is embedded with it; `mem reembed` rebuilds the same text from the
    store (a missing section gave other vectors)."""
    note = tmp_path / "trip.md"
    note.write_text(NOTE)
    ok(mem(db_path, "retain", "--file", str(note)))
    with Store(db_path) as s:
        ids = s.facts.fact_ids_of_bank(s.banks.require_bank("default"))
        before = s.vectors.vectors_for(ids)
    ok(mem(db_path, "reembed", "--embedder", "multilingual-e5-small"))
    with Store(db_path) as s:
        after = s.vectors.vectors_for(ids)
    assert all(float(np.dot(before[i], after[i])) > 0.9999 for i in ids)


def test_a_note_with_bad_front_matter_is_refused_whole(db_path, tmp_path):
    note = tmp_path / "bad.md"
    note.write_text("---\ntags: [travel\n---\nText.\n")
    one_error_line(mem(db_path, "retain", "--file", str(note)), "bad.md", "front matter")
    note.write_text("---\ndate: someday soon\n---\nText.\n")
    one_error_line(mem(db_path, "retain", "--file", str(note)), "bad.md", '"date"')
    assert not db_path.exists()


# -- mem sync ------------------------------------------------------------------------------


PEOPLE = ["Ana", "Ben", "Chloe", "Dev", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun"]
VERBS = ["keeps", "lent", "repaired", "painted", "sold", "borrowed", "found", "lost", "hid"]
THINGS = ["bicycle", "violin", "passport", "tent", "kettle", "ladder", "camera", "telescope"]
PLACES = ["attic", "garage", "cellar", "office", "shed", "hallway", "kitchen", "studio", "van"]


def write_notes(root: Path, numbers, version: str = "") -> dict[str, str]:
    """One-sentence notes in five subfolders: relative path -> its one fact's text."""
    out = {}
    for i in numbers:
        rel = f"d{i % 5}/note-{i:03d}.md"
        who, verb = PEOPLE[i % 10], VERBS[i // 10 % 9]
        what, where = THINGS[i // 90 % 8], PLACES[i * 7 % 9]
        text = f"{who} {verb} the {version}{what} in the {where} on day {i}."
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
        out[rel] = text
    return out


def test_a_synced_folder_edited_and_synced_again_is_exactly_the_store(db_path, tmp_path):
    root = tmp_path / "vault"
    expected = write_notes(root, range(500))
    r = mem(db_path, "sync", str(root))
    ok(r)
    assert "500 added, 0 replaced, 0 forgotten, 0 unchanged" in r.stderr
    assert documents(db_path) == {rel: [text] for rel, text in expected.items()}
    first_ids = {f["document_id"]: f["id"] for f in facts(db_path)}
    # 10 changed, 5 deleted, 5 added
    expected.update(write_notes(root, range(0, 100, 10), version="red "))
    for i in range(100, 105):
        rel = f"d{i % 5}/note-{i:03d}.md"
        (root / rel).unlink()
        del expected[rel]
    expected.update(write_notes(root, range(500, 505)))
    r = mem(db_path, "sync", str(root), "--dry-run")
    ok(r)
    planned = r.stdout.splitlines()
    assert sum(line.startswith("add ") for line in planned) == 5
    assert sum(line.startswith("replace ") for line in planned) == 10
    assert sum(line.startswith("forget ") for line in planned) == 5
    assert len(documents(db_path)) == 500  # a dry run changes nothing
    r = mem(db_path, "sync", str(root))
    ok(r)
    assert "5 added, 10 replaced, 5 forgotten, 485 unchanged" in r.stderr
    assert documents(db_path) == {rel: [text] for rel, text in expected.items()}
    now_ids = {f["document_id"]: f["id"] for f in facts(db_path)}
    unchanged = [rel for rel in now_ids if rel in first_ids and " red " not in expected[rel]]
    assert len(unchanged) == 485
    assert all(now_ids[rel] == first_ids[rel] for rel in unchanged)  # not retained again
    assert staging_rows(db_path) == 0
    r = mem(db_path, "sync", str(root))
    assert "0 added, 0 replaced, 0 forgotten, 500 unchanged" in r.stderr
    assert ok(mem(db_path, "doctor")) is not None


def test_a_sync_killed_midway_then_run_again_leaves_the_exact_store(db_path, tmp_path):
    root = tmp_path / "vault"
    # 400 notes: two retain groups (documents.GROUP_ITEMS = 256); killed after the first
    # went live, while the second is on its way
    expected = write_notes(root, range(400))
    proc = subprocess.Popen(
        [MEM, "--db", str(db_path), "sync", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stored = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                stored = conn.execute(
                    "SELECT count(*) FROM facts f JOIN banks b ON b.id = f.bank_id "
                    "WHERE b.kind = 'user'"
                ).fetchone()[0]
            finally:
                conn.close()
        except apsw.Error:
            stored = 0  # no store yet, or its schema is being made
        if stored:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL  # killed before it finished
    assert 0 < stored < 400
    r = subprocess.run(
        [MEM, "--db", str(db_path), "sync", str(root)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert documents(db_path) == {rel: [text] for rel, text in expected.items()}
    assert staging_rows(db_path) == 0


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_synced_folder_moved_to_another_store_keeps_syncing_there(
    backend, db_path, tmp_path, request
):
    """Export and import carry where each document came from: a store moved by them (to a
    new file, or to PostgreSQL for a team) takes the folder's next edits, instead of
    refusing every note as "retained otherwise"."""
    root = tmp_path / "vault"
    expected = write_notes(root, range(6))
    ok(mem(db_path, "sync", str(root)))
    exported = tmp_path / "bank.jsonl"
    ok(mem(db_path, "export", "--output", str(exported)))
    moved = tmp_path / "moved.db" if backend == "sqlite" else request.getfixturevalue("pg_url")
    ok(mem(moved, "import", str(exported)))
    expected.update(write_notes(root, [0], version="red "))
    (root / "d1/note-001.md").unlink()
    del expected["d1/note-001.md"]
    r = mem(moved, "sync", str(root))
    ok(r)
    assert "0 added, 1 replaced, 1 forgotten, 4 unchanged" in r.stderr, r.stderr
    assert "retained otherwise" not in r.stderr
    assert documents(moved) == {rel: [text] for rel, text in expected.items()}
    # The file the store was moved from is as it was.
    assert len(documents(db_path)) == 6


def test_a_sync_never_forgets_what_it_did_not_make(db_path, tmp_path):
    root = tmp_path / "vault"
    (root / "sub").mkdir(parents=True)
    (root / "a.md").write_text("The attic key hangs by the door.\n")
    (root / "sub" / "b.md").write_text("The cellar key is in the blue jar.\n")
    # retained by hand, one with the id a file of the folder will have, one like it
    ok(mem(db_path, "retain", "Hand-made note about the garden.", "--document", "c.md"))
    ok(mem(db_path, "retain", "Another hand note.", "--document", "sub/a.md"))
    (root / "c.md").write_text("The file c.\n")
    r = mem(db_path, "sync", str(root))
    assert r.exit_code == 1  # a file was skipped, and says so
    assert "skipped c.md: document 'c.md' was retained otherwise" in r.stderr
    docs = documents(db_path)
    assert docs["c.md"] == ["Hand-made note about the garden."]  # not replaced
    assert set(docs) == {"a.md", "sub/b.md", "c.md", "sub/a.md"}
    (root / "c.md").unlink()
    (root / "a.md").unlink()
    ok(mem(db_path, "sync", str(root)))
    assert set(documents(db_path)) == {"sub/b.md", "c.md", "sub/a.md"}
    # another folder synced into the same bank keeps its own documents
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("Other folder note.\n")
    ok(mem(db_path, "sync", str(other)))
    ok(mem(db_path, "sync", str(root)))
    assert set(documents(db_path)) == {"sub/b.md", "c.md", "sub/a.md", "x.md"}


def test_a_missing_or_empty_root_forgets_nothing(db_path, tmp_path):
    root = tmp_path / "mnt" / "vault"
    write_notes(root, range(3))
    ok(mem(db_path, "sync", str(root)))
    os.rename(root, tmp_path / "mnt" / "away")  # unmounted
    one_error_line(mem(db_path, "sync", str(root)), "does not exist", "nothing forgotten")
    root.mkdir()  # an empty mount point
    one_error_line(mem(db_path, "sync", str(root)), "no file to sync", "--allow-empty")
    r = mem(db_path, "sync", str(root), "--dry-run")
    assert r.exit_code == 1
    assert len(documents(db_path)) == 3
    (root / "file.md").write_text("I am a file, not the point.\n")
    one_error_line(mem(db_path, "sync", str(root / "file.md")), "not a folder")
    (root / "file.md").unlink()
    r = mem(db_path, "sync", str(root), "--allow-empty")
    ok(r)
    assert "3 forgotten" in r.stderr and documents(db_path) == {}


def test_sync_honours_gitignore_memignore_hidden_files_and_globs(db_path, tmp_path):
    root = tmp_path / "vault"
    (root / "drafts").mkdir(parents=True)
    (root / ".obsidian").mkdir()
    (root / "sub").mkdir()
    (root / "keep.md").write_text("Keep me.\n")
    (root / "notes.txt").write_text("A plain text note.\n")
    (root / "drafts" / "d.md").write_text("A draft.\n")
    (root / "secret.md").write_text("A secret.\n")
    (root / "sub" / "private.md").write_text("Private.\n")
    (root / "sub" / "open.md").write_text("Open.\n")
    (root / ".obsidian" / "workspace.md").write_text("Editor state.\n")
    (root / "image.png").write_bytes(b"\x89PNG\r\n")
    (root / ".gitignore").write_text("drafts/\n")
    (root / ".memignore").write_text("secret.md\n")
    (root / "sub" / ".memignore").write_text("*.md\n!open.md\n")
    ok(mem(db_path, "sync", str(root)))
    assert set(documents(db_path)) == {"keep.md", "notes.txt", "sub/open.md"}
    assert documents(db_path)["notes.txt"] == ["A plain text note."]
    # a file newly ignored, or no longer matched, is forgotten
    (root / ".memignore").write_text("secret.md\nkeep.md\n")
    r = mem(db_path, "sync", str(root), "--glob", "**/*.md")
    ok(r)
    assert set(documents(db_path)) == {"sub/open.md"}
    assert "2 forgotten" in r.stderr


def test_sync_watch_follows_changes_and_stops_cleanly_on_ctrl_c(db_path, tmp_path):
    root = tmp_path / "vault"
    root.mkdir()
    (root / "first.md").write_text("The first note.\n")
    proc = subprocess.Popen(
        [MEM, "--db", str(db_path), "sync", str(root), "--watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        line = proc.stderr.readline()
        while line and "watching" not in line:  # the first sync is done, the watcher live
            line = proc.stderr.readline()
        assert "first.md" in documents(db_path)
        (root / "second.md").write_text("The second note, written while watched.\n")
        found = False
        while time.monotonic() < deadline and not found:
            time.sleep(0.2)
            found = "second.md" in documents(db_path)
        assert found
        (root / "first.md").unlink()
        while time.monotonic() < deadline and "first.md" in documents(db_path):
            time.sleep(0.2)
        assert set(documents(db_path)) == {"second.md"}
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped watching" in err and "Traceback" not in err


# -- mem import --from ----------------------------------------------------------------------


def chatgpt_export() -> list[dict]:
    """conversations.json as ChatGPT's data export writes it: a mapping tree of nodes, with
    a system message, a regenerated answer on a side branch and a hidden message."""

    def node(node_id, parent, children, role=None, text="", at=None, hidden=False):
        message = None
        if role is not None:
            message = {
                "id": f"msg-{node_id}",
                "author": {"role": role, "name": None, "metadata": {}},
                "create_time": at,
                "update_time": None,
                "content": {"content_type": "text", "parts": [text]},
                "status": "finished_successfully",
                "end_turn": True,
                "weight": 1.0,
                "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {},
                "recipient": "all",
            }
        return {"id": node_id, "message": message, "parent": parent, "children": children}

    mapping = {
        "root": node("root", None, ["sys"]),
        "sys": node("sys", "root", ["u1"], "system", "You are ChatGPT.", 1711000000.0, True),
        "u1": node("u1", "sys", ["a1", "a2"], "user", "I want to visit Lisbon in May.", 1711000100),
        "a1": node("a1", "u1", [], "assistant", "An answer that was regenerated.", 1711000110.0),
        "a2": node("a2", "u1", ["u2"], "assistant", "May is warm there; book early.", 1711000120.0),
        "u2": node("u2", "a2", [], "user", "Then I will book flights for May 9.", 1711000200.0),
    }  # fmt: skip
    return [
        {
            "title": "Lisbon in May",
            "create_time": 1711000000.0,
            "update_time": 1711000200.0,
            "mapping": mapping,
            "moderation_results": [],
            "current_node": "u2",
            "plugin_ids": None,
            "conversation_id": "6601-c0ffee",
            "id": "6601-c0ffee",
        }
    ]


def claude_export() -> list[dict]:
    """conversations.json as Claude's data export writes it."""

    def message(uuid, sender, text, at):
        return {
            "uuid": uuid,
            "text": text,
            "content": [{"type": "text", "text": text, "start_timestamp": at, "citations": []}],
            "sender": sender,
            "created_at": at,
            "updated_at": at,
            "attachments": [],
            "files": [],
        }

    return [
        {
            "uuid": "5c1d-boiler",
            "name": "Noisy boiler",
            "created_at": "2024-03-01T09:00:00.000000Z",
            "updated_at": "2024-03-01T09:05:00.000000Z",
            "account": {"uuid": "acct-1"},
            "chat_messages": [
                message("m1", "human", "The boiler bangs at night.", "2024-03-01T09:00:01.000000Z"),
                message("m2", "assistant", "Bleed the radiators first.", "2024-03-01T09:00:09Z"),
            ],
        }
    ]


def mem0_export() -> dict:
    """Memories as mem0's get_all() lists them ({"results": [...]})."""
    return {
        "results": [
            {
                "id": "7f1e-1",
                "memory": "Likes Italian food",
                "hash": "a1",
                "metadata": None,
                "categories": ["food"],
                "created_at": "2024-07-01T10:00:00-07:00",
                "updated_at": "2024-07-02T10:00:00-07:00",
                "user_id": "alex",
            },
            {
                "id": "7f1e-2",
                "memory": "Has a cat named Miso",
                "hash": "a2",
                "metadata": {"source": "chat"},
                "categories": [],
                "created_at": "2024-07-01T11:00:00-07:00",
                "updated_at": None,
                "user_id": "alex",
            },
        ]
    }


def mcp_memory_lines() -> list[dict]:
    """memory.json as the MCP reference memory server saves it: a JSON object a line."""
    return [
        {"type": "entity", "name": "John_Smith", "entityType": "person",
         "observations": ["Speaks fluent Spanish", "Graduated in 2019"]},
        {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": []},
        {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    ]  # fmt: skip


def chat_lines() -> list[dict]:
    """Plain JSONL: a message a line, and a whole conversation on a line."""
    return [
        {"id": "1", "role": "user", "content": "The gate code is 4411.",
         "timestamp": "2024-05-01T10:00:00Z", "conversation_id": "s1"},
        {"id": "2", "role": "assistant", "content": "Noted: gate code 4411.",
         "timestamp": "2024-05-01T10:00:05Z", "conversation_id": "s1"},
        {"id": "t9", "timestamp": "2024-06-01T08:00:00Z",
         "messages": [{"role": "user",
                       "content": [{"type": "text", "text": "My sister is Ana."}]}]},
    ]  # fmt: skip


def write(path: Path, obj, lines: bool = False) -> Path:
    if lines:
        path.write_text("\n".join(json.dumps(o) for o in obj))
    else:
        path.write_text(json.dumps(obj, indent=1))
    return path


def test_chatgpt_and_claude_exports_import_a_conversation_per_document(db_path, tmp_path):
    """Before: `mem import` read only `mem export` files."""
    gpt = write(tmp_path / "conversations.json", chatgpt_export())
    ok(mem(db_path, "import", "--from", "chatgpt", str(gpt)))
    claude = write(tmp_path / "claude.json", claude_export())
    ok(mem(db_path, "import", "--from", "claude", str(claude)))
    rows = {f["text"]: f for f in facts(db_path)}
    assert set(rows) == {
        "I want to visit Lisbon in May.",
        "May is warm there; book early.",  # the branch current_node ends, not the side one
        "Then I will book flights for May 9.",
        "The boiler bangs at night.",
        "Bleed the radiators first.",
    }
    assert rows["I want to visit Lisbon in May."]["context"] == "user"
    assert rows["May is warm there; book early."]["context"] == "ChatGPT"
    assert rows["Bleed the radiators first."]["context"] == "Claude"
    assert rows["The boiler bangs at night."]["context"] == "user"
    assert rows["I want to visit Lisbon in May."]["document_id"] == "chatgpt/6601-c0ffee"
    assert rows["I want to visit Lisbon in May."]["mentioned_at"] == "2024-03-21T05:48:20Z"
    assert rows["Bleed the radiators first."]["document_id"] == "claude/5c1d-boiler"
    assert rows["Bleed the radiators first."]["mentioned_at"] == "2024-03-01T09:00:09Z"
    assert rows["I want to visit Lisbon in May."]["source_id"] == "msg-u1"
    # the same export again: nothing new
    r = mem(db_path, "import", "--from", "chatgpt", str(gpt))
    ok(r)
    assert "0 documents added, 0 replaced, 1 unchanged" in r.stderr
    assert len(facts(db_path)) == 5
    # a conversation that went on replaces its document
    export = chatgpt_export()
    mapping = export[0]["mapping"]
    mapping["u2"]["children"] = ["a3"]
    mapping["a3"] = json.loads(json.dumps(mapping["a2"]))
    mapping["a3"].update(id="a3", parent="u2", children=[])
    mapping["a3"]["message"].update(id="msg-a3", create_time=1711000300.0)
    mapping["a3"]["message"]["content"]["parts"] = ["Done: flights booked for May 9."]
    export[0]["current_node"] = "a3"
    r = mem(db_path, "import", "--from", "chatgpt", str(write(gpt, export)))
    ok(r)
    assert "0 documents added, 1 replaced" in r.stderr
    assert len(documents(db_path)["chatgpt/6601-c0ffee"]) == 4


def test_mem0_mcp_memory_and_jsonl_import(db_path, tmp_path):
    ok(mem(db_path, "import", "--from", "mem0", str(write(tmp_path / "m.json", mem0_export()))))
    graph = write(tmp_path / "memory.json", mcp_memory_lines(), lines=True)
    ok(mem(db_path, "import", "--from", "mcp-memory", str(graph)))
    chat = write(tmp_path / "chat.jsonl", chat_lines(), lines=True)
    ok(mem(db_path, "import", "--from", "jsonl", str(chat)))
    rows = {f["text"]: f for f in facts(db_path)}
    likes = rows["Likes Italian food"]
    assert likes["document_id"] == "mem0/alex" and likes["tags"] == ["food"]
    assert likes["mentioned_at"] == "2024-07-02T17:00:00Z"  # when mem0 last wrote it
    assert likes["source_id"] == "7f1e-1"
    spanish = rows["Speaks fluent Spanish"]
    assert spanish["context"] == "John_Smith" and "John_Smith" in spanish["entities"]
    assert spanish["document_id"] == "mcp-memory/John_Smith"
    works = rows["John_Smith works at Anthropic"]
    assert {"John_Smith", "Anthropic"} <= set(works["entities"])
    assert rows["The gate code is 4411."]["context"] == "user"
    assert rows["The gate code is 4411."]["document_id"] == "s1"
    assert rows["Noted: gate code 4411."]["context"] == "assistant"
    assert rows["My sister is Ana."]["document_id"] == "t9"
    assert rows["My sister is Ana."]["mentioned_at"] == "2024-06-01T08:00:00Z"
    before = len(rows)
    for fmt, path in (("mem0", tmp_path / "m.json"), ("mcp-memory", graph), ("jsonl", chat)):
        r = mem(db_path, "import", "--from", fmt, str(path))
        ok(r)
        assert "0 documents added, 0 replaced" in r.stderr, r.stderr
    assert len(facts(db_path)) == before


BAD = [
    ("chatgpt", "conversations.json", "[{\"title\": \"x\"}]", '[0]: no "mapping"'),
    ("chatgpt", "conversations.json", "{not json", "line 1 column 2"),
    ("chatgpt", "claude.json", json.dumps(claude_export()), "use --from claude"),
    ("claude", "conversations.json", json.dumps(chatgpt_export()), "use --from chatgpt"),
    ("mem0", "m.json", '{"results": [{"memory": "ok"}, {"id": 2}]}', '[1]: no "memory" text'),
    ("mcp-memory", "memory.json", '{"type": "entity", "name": "A"}\n{"type": "thing"}',
     "line 2: not an \"entity\" or \"relation\""),
    ("mcp-memory", "memory.json", '{"type": "entity", "name": "A"}\n{oops', "line 2: not JSON"),
    ("jsonl", "chat.jsonl", '{"content": "fine"}\n{"role": "user"}', "line 2: no text"),
    ("jsonl", "chat.jsonl", '{"content": "x", "timestamp": "March 32"}', "line 1: timestamp"),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "name", "content", "needle"), BAD)
def test_malformed_imports_fail_whole_with_one_line_naming_the_place(
    db_path, tmp_path, fmt, name, content, needle
):
    path = tmp_path / name
    path.write_text(content)
    one_error_line(mem(db_path, "import", "--from", fmt, str(path)), name, needle)
    assert not db_path.exists()  # nothing written, not even a store


def test_a_malformed_import_leaves_a_store_as_it_was(db_path, tmp_path):
    ok(mem(db_path, "retain", "The spare key is under the blue pot."))
    export = chatgpt_export()
    export.append(json.loads(json.dumps(export[0])))
    export[1]["id"] = export[1]["conversation_id"] = "second"
    export[1]["mapping"]["u2"]["message"]["author"]["role"] = 7
    path = write(tmp_path / "conversations.json", export)
    one_error_line(
        mem(db_path, "import", "--from", "chatgpt", str(path)),
        "[1].mapping.u2.message.author.role: must be a string",
    )
    assert [f["text"] for f in facts(db_path)] == ["The spare key is under the blue pot."]


def test_a_subfolder_that_cannot_be_listed_keeps_its_documents(tmp_path):
    """A subfolder sync cannot list (permissions) is not a deleted one: its files'
    documents stay. Root reads every folder, so as root the sync runs as nobody."""
    import shutil
    import tempfile

    as_user: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot make a folder unreadable")
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    base = Path(tempfile.mkdtemp(dir="/tmp"))  # not under pytest's root-only tmp folder
    try:
        base.chmod(0o755)
        root, store = base / "vault", base / "store"
        (root / "sub").mkdir(parents=True)
        store.mkdir()
        (root / "a.md").write_text("The attic key hangs by the door.\n")
        (root / "sub" / "b.md").write_text("The cellar key is in the blue jar.\n")
        (root / "c.md").write_text("The shed key is lost.\n")
        db = store / "mem.db"
        ok(mem(db, "sync", str(root)))
        (root / "a.md").unlink()
        (root / "sub").chmod(0)
        if as_user:
            for path in [store, *store.iterdir()]:
                os.chown(path, 65534, 65534)
        r = subprocess.run(
            [*as_user, MEM, "--db", str(db), "sync", str(root)],
            capture_output=True,
            text=True,
            env={**os.environ, "HOME": str(base)},
        )
        assert r.returncode == 1, r.stderr
        assert "sub/b.md: its folder could not be read: document kept" in r.stderr
        assert "1 forgotten" in r.stderr  # a.md, which is gone
        (root / "sub").chmod(0o755)
        assert set(documents(db)) == {"sub/b.md", "c.md"}
    finally:
        if (base / "vault" / "sub").exists():
            (base / "vault" / "sub").chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_a_dry_run_reads_a_store_of_the_schema_before_sources_without_upgrading_it(
    db_path, tmp_path
):
    ok(mem(db_path, "retain", "An older note.", "--document", "a.md"))
    conn = apsw.Connection(str(db_path))
    conn.execute(
        "DROP INDEX documents_sync_root; ALTER TABLE documents DROP COLUMN sync_root; "
        "ALTER TABLE documents DROP COLUMN source_hash; DROP TABLE sentence_vec; "
        "PRAGMA user_version = 8"
    )
    conn.close()
    root = tmp_path / "vault"
    root.mkdir()
    (root / "b.md").write_text("A new note.\n")
    r = mem(db_path, "sync", str(root), "--dry-run")
    ok(r)
    assert r.stdout.splitlines() == ["add      b.md"]
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
    conn.close()
    ok(mem(db_path, "sync", str(root)))  # a sync upgrades it, as any write does
    assert set(documents(db_path)) == {"a.md", "b.md"}


def test_an_openmemory_export_zip_imports_its_memories(db_path, tmp_path):
    """OpenMemory's export: a zip holding memories.json (its relational dump) and
    memories.jsonl.gz."""
    import gzip
    import zipfile

    memories = [
        {"id": "m1", "user_id": "u-1", "app_id": "a-1", "content": "Prefers window seats",
         "metadata": {}, "state": "active", "created_at": "2025-02-01T08:00:00+00:00",
         "updated_at": "2025-02-01T08:00:00+00:00", "archived_at": None, "deleted_at": None,
         "category_ids": ["c-1"]},
        {"id": "m2", "user_id": "u-1", "app_id": "a-1", "content": "An old address",
         "metadata": {}, "state": "deleted", "created_at": "2025-01-01T08:00:00+00:00",
         "updated_at": None, "archived_at": None, "deleted_at": "2025-01-05T08:00:00+00:00",
         "category_ids": []},
    ]  # fmt: skip
    dump = {
        "user": {"id": "u-1", "user_id": "alex", "name": "Alex", "email": None},
        "apps": [{"id": "a-1", "name": "cursor"}],
        "categories": [{"id": "c-1", "name": "travel", "description": None}],
        "memories": memories,
        "memory_categories": [{"memory_id": "m1", "category_id": "c-1"}],
        "status_history": [],
        "access_controls": [],
        "export_meta": {"version": "1"},
    }
    path = tmp_path / "memories_export_alex.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("memories.json", json.dumps(dump, indent=2))
        zf.writestr("memories.jsonl.gz", gzip.compress(b"{}\n"))
    ok(mem(db_path, "import", "--from", "mem0", str(path)))
    (fact,) = facts(db_path)
    assert fact["text"] == "Prefers window seats" and fact["tags"] == ["travel"]
    assert fact["document_id"] == "mem0/alex" and fact["mentioned_at"] == "2025-02-01T08:00:00Z"
