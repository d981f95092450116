"""Settings: the TOML file, MEM_* variables and flags (flag > env > config > default), `mem
config`, and --trace saying where each value came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli import app

runner = CliRunner()


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "conf" / "config.toml"
    monkeypatch.setenv("MEM_CONFIG", str(path))
    for key in ("MEM_DB", "MEM_BANK", "MEM_BUDGET", "MEM_MAX_TOKENS", "MEM_FORMAT"):
        monkeypatch.delenv(key, raising=False)
    return path


def mem(*args: str, env: dict | None = None):
    return runner.invoke(app, list(args), env=env)


@pytest.fixture
def db(db_path: Path, cfg: Path) -> Path:
    r = mem("--db", str(db_path), "retain", "--at", "2026-03-21", "Booked the Lisbon trip.")
    assert r.exit_code == 0, r.stderr
    return db_path


def recall_json(db: Path, *args: str, env: dict | None = None) -> dict:
    r = mem("--db", str(db), "recall", "Lisbon", *args, env=env)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_set_show_path_and_the_file_is_toml(cfg, tmp_path):
    import tomllib

    odd = tmp_path / 'my "odd" model.gguf'
    odd.write_bytes(b"GGUF")
    assert mem("config", "path").stdout.strip() == str(cfg)
    assert mem("config", "set", "budget", "high").exit_code == 0
    assert mem("config", "set", "max_tokens", "300").exit_code == 0
    assert mem("config", "set", "embedder", str(odd)).exit_code == 0
    data = tomllib.loads(cfg.read_text())
    assert data == {"budget": "high", "max_tokens": 300, "embedder": str(odd)}
    shown = json.loads(mem("config", "show", "--json").stdout)
    assert shown["settings"]["budget"] == {
        "value": "high",
        "source": f"config {cfg}",
        "env": "MEM_BUDGET",
    }
    assert shown["settings"]["format"]["source"] == "default"
    assert mem("config", "unset", "embedder").exit_code == 0
    assert "embedder" not in tomllib.loads(cfg.read_text())


def test_bad_key_or_value_is_a_usage_error_and_changes_nothing(cfg):
    mem("config", "set", "budget", "low")
    before = cfg.read_text()
    for args in (
        ("budget", "huge"),
        ("max_tokens", "0"),
        ("colour", "blue"),
        # A model that is not there, and a bank name no store takes, were accepted, and
        # every recall (or retain) failed after.
        ("reranker", "/nonexistent.gguf"),
        ("embedder", "bogus"),
        ("bank", "a\tb"),
        ("threads", "100000"),
    ):
        r = mem("config", "set", *args)
        assert r.exit_code == 2, args
        assert r.stderr.startswith("mem: error: ") and len(r.stderr.splitlines()) == 1
    assert cfg.read_text() == before


def test_precedence_flag_over_env_over_config_over_default(db, cfg):
    assert recall_json(db, "--format", "json")["budget"] == "mid"  # default
    mem("config", "set", "budget", "low")
    mem("config", "set", "format", "json")
    obj = recall_json(db)  # format json from the config file
    assert obj["budget"] == "low"
    assert recall_json(db, env={"MEM_BUDGET": "high"})["budget"] == "high"
    assert recall_json(db, "--budget", "mid", env={"MEM_BUDGET": "high"})["budget"] == "mid"
    mem("config", "set", "max_tokens", "123")
    assert recall_json(db)["max_tokens"] == 123
    assert recall_json(db, env={"MEM_MAX_TOKENS": "77"})["max_tokens"] == 77


def test_db_and_bank_from_the_config_file(db, cfg):
    mem("config", "set", "db", str(db))
    r = mem("recall", "Lisbon", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert "Lisbon" in json.loads(r.stdout)["results"][0]["text"]
    mem("config", "set", "bank", "work")
    r = mem("recall", "Lisbon")
    assert r.exit_code == 1 and "unknown bank 'work'" in r.stderr
    assert mem("--bank", "default", "recall", "Lisbon").exit_code == 0  # the flag wins


def test_trace_says_where_each_value_came_from(db, cfg):
    mem("config", "set", "max_tokens", "500")
    r = mem("--db", str(db), "recall", "Lisbon", "--trace", env={"MEM_BUDGET": "low"})
    assert r.exit_code == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("settings: "))
    assert f"db={db} (flag)" in line
    assert "budget=low (env MEM_BUDGET)" in line
    assert f"max_tokens=500 (config {cfg})" in line
    assert "bank=default (default)" in line
    obj = recall_json(db, "--trace", "--format", "json")
    assert obj["trace"]["sources"]["max_tokens"] == {"value": 500, "source": f"config {cfg}"}


def test_a_broken_config_file_is_one_line_and_config_can_repair_it(db, cfg):
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("budget = [unclosed\n")
    r = mem("--db", str(db), "recall", "Lisbon")
    assert r.exit_code == 1
    assert "is not valid TOML" in r.stderr and len(r.stderr.splitlines()) == 1
    cfg.write_text('budgte = "high"\n')
    r = mem("--db", str(db), "recall", "Lisbon")
    assert r.exit_code == 1 and "unknown key 'budgte'" in r.stderr
    # `mem config` itself still runs, so the file can be inspected and fixed.
    assert mem("config", "path").exit_code == 0
    cfg.unlink()
    assert mem("config", "set", "budget", "high").exit_code == 0
    assert recall_json(db, "--format", "json")["budget"] == "high"


def test_a_bad_environment_value_names_the_variable(db, cfg):
    r = mem("--db", str(db), "recall", "Lisbon", env={"MEM_MAX_TOKENS": "lots"})
    assert r.exit_code == 1
    assert r.stderr.startswith("mem: error: $MEM_MAX_TOKENS: ")


def test_models_add_checks_the_gguf_and_records_it(cfg, db, tmp_path):
    import tomllib

    from memcli.models.convert import build_test_reranker, default_embedder_path
    from memcli.models.e5 import e5_embedder_path

    rank = build_test_reranker(tmp_path / "rank.gguf")
    minilm = default_embedder_path()
    e5 = e5_embedder_path()  # the bank's model (the default), as a file
    # The wrong role for each file: refused with the reason, nothing recorded.
    r = mem("models", "add", str(rank), "--as", "embedder")
    assert r.exit_code == 1 and "RANK pooling: it is a reranker" in r.stderr
    r = mem("models", "add", str(minilm), "--as", "reranker")
    assert r.exit_code == 1 and "its pooling is mean" in r.stderr
    assert not cfg.exists()
    r = mem("models", "add", str(rank), "--as", "reranker")
    assert r.exit_code == 0, r.stderr
    assert "bert, rank pooling" in r.stderr
    r = mem("models", "add", str(e5), "--as", "embedder", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["embedding_length"] == 384
    assert tomllib.loads(cfg.read_text()) == {"embedder": str(e5), "reranker": str(rank)}
    shown = json.loads(mem("--db", str(db), "models", "--json").stdout)
    assert shown["reranker"] == {"path": str(rank), "source": f"config {cfg}"}
    assert shown["embedder"]["setting_source"] == f"config {cfg}"
    # The recorded reranker is the one recall uses.
    obj = recall_json(db, "--format", "json")
    assert obj["reranker"] == rank.stem


def test_models_shows_the_bank_model_and_no_reranker(cfg, db):
    r = mem("--db", str(db), "models")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("embedder  multilingual-e5-small  (bank 'default' was made with it")
    assert "reranker  none" in r.stdout


def test_a_relative_path_is_stored_absolute(cfg, tmp_path, monkeypatch):
    import tomllib

    monkeypatch.chdir(tmp_path)
    assert mem("config", "set", "db", "notes/mem.db").exit_code == 0
    assert tomllib.loads(cfg.read_text())["db"] == str(tmp_path / "notes" / "mem.db")


def test_show_reports_the_global_flags(cfg, tmp_path):
    r = mem("--db", str(tmp_path / "x.db"), "--bank", "work", "config", "show", "--json")
    shown = json.loads(r.stdout)["settings"]
    assert shown["db"] == {"value": str(tmp_path / "x.db"), "source": "flag", "env": "MEM_DB"}
    assert shown["bank"]["source"] == "flag" and shown["bank"]["value"] == "work"


def test_a_setting_past_the_flags_range_is_refused_from_the_environment_and_the_file(
    tmp_path, monkeypatch
):
    """--max-tokens 99999999999999999999 was out of range (exit 2), but MEM_MAX_TOKENS and
    `config set max_tokens` took it, and recall printed it back as the budget."""
    from memcli.config import ConfigError, Settings

    huge = "9" * 20
    monkeypatch.setenv("MEM_MAX_TOKENS", huge)
    monkeypatch.setenv("MEM_CONFIG", str(tmp_path / "config.toml"))
    with pytest.raises(ConfigError, match="out of range"):
        Settings().resolve("max_tokens", None)


def test_config_set_and_unset_keep_the_users_comments(tmp_path, monkeypatch):
    """`mem config set format md` rewrote the file whole: the user's comments were gone."""
    from memcli.config import load_file, set_value, unset_value

    path = tmp_path / "config.toml"
    path.write_text('# keep this note\nbudget = "high"  # why\n\n# models\nthreads = 2\n')
    set_value("format", "md", path)
    assert 'budget = "high"  # why' in path.read_text()  # a line whose value stays, whole
    set_value("budget", "low", path)
    unset_value("threads", path)
    text = path.read_text()
    assert "# keep this note" in text and "# models" in text
    assert text.index("# keep this note") < text.index("budget") < text.index("format")
    assert load_file(path) == {"budget": "low", "format": "md"}


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_config_set_edits_quoted_keys_and_keeps_a_changed_lines_comment(tmp_path, newline):
    """A quoted key ("bank" = ...) made set rewrite the file whole, every comment lost;
    a changed value lost its line's comment; a CRLF file came back LF."""
    from memcli.config import load_file, set_value

    path = tmp_path / "config.toml"
    lines = ["# keep: work laptop", '"bank" = "work"  # team bank', "max_tokens = 100 # tuned"]
    path.write_bytes(newline.join(lines).encode() + newline.encode())
    set_value("budget", "high", path)
    set_value("max_tokens", "200", path)
    text = path.read_bytes().decode()
    assert "# keep: work laptop" in text and '"bank" = "work"  # team bank' in text
    assert "max_tokens = 200  # tuned" in text
    assert text.count(newline) == 4 and (newline == "\r\n" or "\r" not in text)
    assert load_file(path) == {"bank": "work", "budget": "high", "max_tokens": 200}
