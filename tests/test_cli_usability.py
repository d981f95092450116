"""The CLI as a person meets it (issue 33, finding 9): help that reads at 80 and 40 columns,
`--format` on every command that prints data (`--json` kept), counts that agree with their
nouns, and an embedder setting the store's banks could not use refused."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from tests.conftest import run_at_terminal

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def mem_path() -> str:
    script = Path(sys.executable).with_name("mem")
    return str(script)


def help_at(columns: int, *command: str) -> list[str]:
    """`mem COMMAND --help` on a terminal of this width: its lines, styling removed."""
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50"}
    env.pop("NO_COLOR", None)
    code, shown = run_at_terminal([mem_path(), *command, "--help"], lambda *_: None, env)
    assert code == 0, shown
    return [ANSI.sub("", line) for line in shown.replace("\r", "").split("\n")]


RECALL_OPTIONS = (
    "--budget",
    "--max-tokens",
    "--include-chunks",
    "--max-chunk-tokens",
    "--reranker",
    "--no-boosts",
    "--min-score",
    "--format",
    "--as-of",
    "--embedder",
)


@pytest.mark.parametrize("columns", [80, 40])
def test_help_reads_at_80_and_40_columns(columns):
    """At 80 columns `mem recall --help` cut option names (`--max-chunk-toke…`) and wrapped
    each description into an 18-character column; at 40 it was unreadable."""
    lines = help_at(columns, "recall")
    text = "\n".join(lines)
    assert "…" not in text
    assert all(len(line) <= columns for line in lines), max(lines, key=len)
    names = {word for line in lines for word in re.findall(r"--[a-z][a-z-]*", line)}
    for option in RECALL_OPTIONS:
        assert option in names, (option, text)
    # A description runs across the width, not down a narrow column: its first words
    # are on one line.
    assert any("Candidates per arm: low 100, mid" in line for line in lines), text
    assert "--no-include-chunks" not in text  # a flag, not a pair of switches
    for command in ((), ("retain",), ("list",), ("forget",), ("mcp",), ("config", "set")):
        lines = help_at(columns, *command)
        assert all(len(line) <= columns for line in lines), (command, max(lines, key=len))
        assert "…" not in "\n".join(line for line in lines if line.lstrip().startswith("-"))


def test_every_command_that_prints_data_takes_format_and_json_stays(db_path, tmp_path):
    runner = CliRunner()

    def mem(*args: str) -> object:
        r = runner.invoke(app, ["--db", str(db_path), *args], env={"MEM_CONFIG": "/nonexistent"})
        assert r.exit_code == 0, (args, r.stdout + r.stderr)
        return r

    retained = mem("retain", "--format", "json", "Ben fixed the boiler.")
    assert json.loads(retained.stdout)["summary"]["facts"] == 1
    assert "1 item, 1 fact stored, 1 new entity, 0 links" in retained.stderr, retained.stderr
    for args in (("stats",), ("models",), ("config", "show")):
        as_format = json.loads(mem(*args, "--format", "json").stdout)
        as_flag = json.loads(mem(*args, "--json").stdout)
        assert as_format == as_flag, args
        assert mem(*args, "--format", "text").stdout.strip()
    stats = mem("stats").stdout
    assert "1 fact, 1 entity, 0 links" in stats, stats
    banks = mem("banks").stdout
    assert "default: 1 fact, 0 documents" in banks, banks
    export = tmp_path / "out.jsonl"
    mem("export", "-o", str(export))
    imported = mem("import", str(export), "--into", "copy", "--format", "json")
    assert json.loads(imported.stdout)["bank"] == "copy"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "boiler.md").write_text("The boiler was serviced in March.\n")
    planned = mem("sync", str(notes), "--dry-run", "--format", "json").stdout
    assert json.loads(planned) == json.loads(mem("sync", str(notes), "--dry-run", "--json").stdout)
    synced = mem("sync", str(notes), "--format", "json")
    assert json.loads(synced.stdout)["added"] == ["boiler.md"], synced.stdout
    assert "1 added" in synced.stderr and "(1 fact, " in synced.stderr, synced.stderr
    clash = runner.invoke(app, ["--db", str(db_path), "stats", "--json", "--format", "text"])
    assert clash.exit_code == 2 and "--json" in clash.stderr


def test_an_embedder_setting_the_banks_cannot_use_is_refused(db_path, tmp_path):
    """`mem config set embedder e5` was accepted on a store whose banks are MiniLM, and every
    recall failed after it."""
    runner = CliRunner()
    config = tmp_path / "config.toml"
    env = {"MEM_CONFIG": str(config)}
    # A MiniLM bank (the default is e5 since issue 35), then e5 asked for.
    r = runner.invoke(
        app, ["--db", str(db_path), "retain", "--embedder", "minilm", "Ben fixed the boiler."],
        env=env,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    r = runner.invoke(app, ["--db", str(db_path), "config", "set", "embedder", "e5"], env=env)
    assert r.exit_code == 2, r.stderr
    assert "'default' (all-MiniLM-L6-v2)" in r.stderr and "reembed" in r.stderr, r.stderr
    assert "nothing was changed" in r.stderr
    assert not config.exists() or "e5" not in config.read_text()
    # The model the banks use is fine, and so is any model for a store with no banks yet.
    r = runner.invoke(app, ["--db", str(db_path), "config", "set", "embedder", "minilm"], env=env)
    assert r.exit_code == 0, r.stderr
    empty = tmp_path / "empty.db"
    r = runner.invoke(app, ["--db", str(empty), "config", "set", "embedder", "e5"], env=env)
    assert r.exit_code == 0, r.stderr
    assert not empty.exists()
    r = runner.invoke(app, ["--db", str(db_path), "recall", "boiler"], env={"MEM_CONFIG": "/x"})
    assert r.exit_code == 0 and "boiler" in r.stdout
