"""The llm plugin through the real `llm` command and its echo model (llm-echo returns the
prompt it was given as JSON): the memories and the question both reach the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli import app

LLM = Path(sys.executable).with_name("llm")
pytestmark = pytest.mark.skipif(not LLM.exists(), reason="llm is not installed (pip install llm)")


@pytest.fixture
def memories(db_path: Path, tmp_path: Path) -> dict[str, str]:
    """A store with two memories, and the environment that points llm and mem at it."""
    runner = CliRunner()
    for at, text in (
        ("2026-03-21", "Decided to book the Lisbon trip for May 9-16."),
        ("2026-04-02", "The boiler was serviced by Anton."),
    ):
        r = runner.invoke(
            app, ["--db", str(db_path), "retain", "--at", at, "--context", "Maya", text]
        )
        assert r.exit_code == 0, r.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEM_", "LLM_"))}
    env.update(
        MEM_DB=str(db_path),
        MEM_CONFIG=str(tmp_path / "no-config.toml"),
        LLM_USER_PATH=str(tmp_path / "llm-home"),
    )
    if os.environ.get("MEM_CACHE_DIR"):
        env["MEM_CACHE_DIR"] = os.environ["MEM_CACHE_DIR"]
    return env


def llm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LLM), *args], env=env, capture_output=True, text=True, timeout=180)


def test_plugin_is_registered_through_its_entry_point(memories):
    r = llm(memories, "plugins")
    assert r.returncode == 0, r.stderr
    ours = [p for p in json.loads(r.stdout) if p["name"] == "memcli"]
    assert ours and set(ours[0]["hooks"]) == {"register_fragment_loaders", "register_tools"}


def test_fragment_puts_memories_before_the_question(memories):
    r = llm(memories, "-m", "echo", "--no-log", "-f", "mem:Lisbon trip", "What did Maya decide?")
    assert r.returncode == 0, r.stderr
    prompt = json.loads(r.stdout)["prompt"]
    assert "Decided to book the Lisbon trip for May 9-16." in prompt
    assert prompt.startswith('Memories relevant to "Lisbon trip", as of ')
    # Said in March about May: both dates reach the model, apart.
    assert "[said 2026-03-21, about 2026-05-09..2026-05-16 (future when said)] Maya: " in prompt
    assert prompt.rstrip().endswith("What did Maya decide?")
    assert prompt.index("Lisbon trip for May") < prompt.index("What did Maya decide?")


def test_fragment_error_is_one_line_and_fails(memories):
    env = {**memories, "MEM_BANK": "nope"}
    r = llm(env, "-m", "echo", "--no-log", "-f", "mem:Lisbon", "What did Maya decide?")
    assert r.returncode != 0
    assert "unknown bank 'nope'" in r.stderr
    assert "Traceback" not in r.stderr


def call_tool(env: dict, prompt: str, query) -> tuple[dict, dict]:
    """The echo model makes the tool calls a prompt asks for, then echoes their results:
    (its first answer, with the call; the one result of the mem_recall call)."""
    call = {"prompt": prompt, "tool_calls": [{"name": "mem_recall", "arguments": {"query": query}}]}
    r = llm(env, "-m", "echo", "--no-log", "--tool", "mem_recall", json.dumps(call))
    assert r.returncode == 0, r.stderr
    # Two JSON objects: the first answer (with the tool call), then the one with its result.
    decoder = json.JSONDecoder()
    text = r.stdout.strip()
    first, end = decoder.raw_decode(text)
    second, _ = decoder.raw_decode(text[end:].lstrip())
    (result,) = second["tool_results"]
    return first, result


def test_tool_lets_the_model_search_memory(memories):
    first, result = call_tool(memories, "Who serviced the boiler?", "boiler service")
    assert first["prompt"] == "Who serviced the boiler?"
    assert result["name"] == "mem_recall"
    assert "The boiler was serviced by Anton." in result["output"]


def test_no_match_tells_the_model_so(memories):
    r = llm(memories, "-m", "echo", "--no-log", "-f", "mem:zzqx", "What is zzqx?")
    assert r.returncode == 0, r.stderr
    prompt = json.loads(r.stdout)["prompt"]
    assert prompt.startswith('No memories relevant to "zzqx" were found')
    assert prompt.rstrip().endswith("What is zzqx?")


def test_fragment_fits_max_tokens_or_says_it_cannot(memories):
    from memcli.tokens import count_tokens

    for budget, whole in ((200, True), (30, False)):
        env = {**memories, "MEM_MAX_TOKENS": str(budget)}
        r = llm(env, "-m", "echo", "--no-log", "-f", "mem:Lisbon trip", "What did Maya decide?")
        assert r.returncode == 0, r.stderr
        prompt = json.loads(r.stdout)["prompt"]
        fragment = prompt[: prompt.rindex("What did Maya decide?")].rstrip()
        if whole:
            assert "Lisbon trip for May 9-16" in fragment and count_tokens(fragment) <= budget
        else:  # no memory block fits 30 tokens with the header line
            assert "none fit 30 tokens" in fragment, fragment


@pytest.mark.parametrize(
    "query, says",
    [
        ("", "mem: error: the query is empty"),
        (123, "mem: error: the query must be text, not int"),
    ],
)
def test_a_bad_tool_query_gets_one_plain_reason(memories, query, says):
    """Before: "mem: error: mem: give a query, e.g. mem:"Lisbon trip"" (the fragment's
    syntax, prefix doubled) and "mem: error: 'int' object is not iterable"."""
    _, result = call_tool(memories, "x", query)
    assert result["output"].startswith(says), result["output"]
    assert "mem: error: mem:" not in result["output"]


def test_the_fragment_is_what_mem_recall_prints_with_the_reranker_set(memories, tmp_path):
    """MEM_RERANKER (or the config's reranker) reranked `mem recall` and not the fragment,
    which README says is what `mem recall` prints."""
    from memcli.models.convert import build_test_reranker

    model = build_test_reranker(tmp_path / "test-rank.gguf")
    env = {**memories, "MEM_RERANKER": str(model)}
    r = llm(env, "fragments", "show", "mem:Lisbon trip")
    assert r.returncode == 0, r.stderr
    cli = subprocess.run(
        [sys.executable, "-m", "memcli", "recall", "Lisbon trip", "--max-tokens", "1500"],
        env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert r.stdout.strip() == cli.stdout.strip()
    # The reranker is loaded: a missing one is an error, as for `mem recall`.
    bad = llm({**env, "MEM_RERANKER": str(tmp_path / "none.gguf")}, "fragments", "show", "mem:x")
    assert bad.returncode != 0 and "none.gguf" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("value", ["abc", "0"])
def test_a_bad_thread_count_is_named_as_the_cli_names_it(memories, value):
    r = llm({**memories, "MEM_THREADS": value}, "fragments", "show", "mem:Lisbon")
    assert r.returncode != 0
    assert f"$MEM_THREADS: '{value}' is not a positive whole number" in r.stderr, r.stderr


def test_nothing_relevant_tells_the_model_so(memories):
    """Memories exist and share words with nothing here, yet the nearest would be noise: the
    relevance floor holds them back and the fragment says nothing relevant was found."""
    r = llm(memories, "-m", "echo", "--no-log", "-f", "mem:quantum chromodynamics", "Explain.")
    assert r.returncode == 0, r.stderr
    prompt = json.loads(r.stdout)["prompt"]
    assert prompt.startswith('No memories relevant to "quantum chromodynamics" were found')
