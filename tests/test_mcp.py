"""`mem mcp` driven by the real MCP client SDK, the server a subprocess as an agent's host
launches it: tools listed with schemas, retain, recall (the same JSON as the CLI), and bad
calls answered as errors while the server keeps serving."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from typer.testing import CliRunner

from memcli.cli import app
from memcli.store import Store


def server_params(db: Path, *extra: str, **env_vars: str) -> StdioServerParameters:
    script = Path(sys.executable).with_name("mem")
    command, prefix = (str(script), []) if script.exists() else (sys.executable, ["-m", "memcli"])
    # The server inherits only a minimal environment from the SDK; pass what the models need.
    env = {k: v for k, v in os.environ.items() if k.startswith(("MEM_", "HOME", "XDG_"))}
    env.update(env_vars)
    return StdioServerParameters(
        command=command, args=[*prefix, "--db", str(db), *extra, "mcp"], env=env
    )


def server_process(db: Path, **popen: Any) -> subprocess.Popen:
    """The server as a plain process (the tests that speak the wire protocol themselves)."""
    params = server_params(db)
    return subprocess.Popen(
        [params.command, *params.args], env={**os.environ, **(params.env or {})}, **popen
    )


# A client's first two messages, as raw JSON-RPC (the tests that speak the wire protocol).
RAW_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
RAW_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def run(coro_fn, *args: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(*args), timeout=240))


def text_of(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_tools_retain_and_recall_match_the_cli(db_path):
    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(server_params(db_path)) as client:
            out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
            out["retain"] = await client.call_tool(
                "retain",
                {
                    "text": "Decided to book the Lisbon trip for May 9-16.",
                    "at": "2026-03-21",
                    "context": "Maya",
                    "tags": ["travel"],
                },
            )
            out["retain2"] = await client.call_tool(
                "retain", {"text": "The boiler was serviced on Tuesday.", "at": "2026-04-02"}
            )
            out["recall"] = await client.call_tool(
                "recall", {"query": "Lisbon trip", "now": "2026-11-20", "max_tokens": 200}
            )
            out["tagged"] = await client.call_tool(
                "recall",
                {
                    "query": "boiler",
                    "now": "2026-11-20",
                    "tags": ["travel"],
                    "tags_match": "all_strict",
                },
            )
        return out

    out = run(session)
    tools = out["tools"]
    assert {"retain", "recall"} <= set(tools)
    recall_schema = tools["recall"].input_schema
    assert recall_schema["required"] == ["query"]
    for name in ("query", "budget", "max_tokens", "tags", "as_of"):
        assert name in recall_schema["properties"], name
    budget = recall_schema["properties"]["budget"]
    assert ["low", "mid", "high"] in [x.get("enum") for x in budget.get("anyOf", [budget])]
    assert tools["retain"].input_schema["required"] == ["text"]

    assert not out["retain"].is_error, text_of(out["retain"])
    stored = out["retain"].structured_content
    assert stored["summary"]["facts"] == 1
    assert stored["stored"][0]["text"].startswith("Decided to book the Lisbon trip")

    assert not out["recall"].is_error, text_of(out["recall"])
    via_mcp = out["recall"].structured_content
    assert via_mcp["results"][0]["context"] == "Maya"
    assert via_mcp["max_tokens"] == 200
    # The same JSON as the CLI gives for the same question.
    r = CliRunner().invoke(
        app,
        [
            "--db",
            str(db_path),
            "recall",
            "Lisbon trip",
            "--now",
            "2026-11-20",
            "--max-tokens",
            "200",
            "--format",
            "json",
        ],
    )
    assert r.exit_code == 0, r.stderr
    assert via_mcp == json.loads(r.stdout)
    # Tags filter: only the tagged Lisbon memory may come back, never the boiler.
    tagged = out["tagged"].structured_content
    assert all("travel" in x["tags"] for x in tagged["results"])


def test_bad_calls_are_errors_and_the_server_keeps_serving(db_path):
    async def session() -> list[Any]:
        async with Client(server_params(db_path)) as client:
            results = [
                await client.call_tool("recall", {"query": "x", "budget": "huge"}),
                await client.call_tool("recall", {"query": "x", "max_tokens": "lots"}),
                await client.call_tool("recall", {"budget": "low"}),
                await client.call_tool("retain", {"text": "x", "at": "not a date at all"}),
                await client.call_tool("no_such_tool", {}),
                # Before: "unexpected OverflowError: int too big to convert".
                await client.call_tool("list", {"offset": 2**63}),
                await client.call_tool("forget", {"ids": [2**64], "dry_run": True}),
            ]
            retained = await client.call_tool("retain", {"text": "Still here after the errors."})
            results.append(await client.call_tool("recall", {"query": "x", "bank": "nope"}))
            results += [retained, await client.call_tool("recall", {"query": "still here"})]
        return results

    *bad, retained, recalled = run(session)
    for result in bad:
        assert result.is_error
        assert text_of(result)  # says what was wrong
    assert "budget" in text_of(bad[0])
    assert "max_tokens" in text_of(bad[1])
    assert "query" in text_of(bad[2])
    assert "nope" in text_of(bad[7])
    assert "offset" in text_of(bad[5]) and "Overflow" not in text_of(bad[5])
    assert "ids" in text_of(bad[6]) and "Overflow" not in text_of(bad[6])
    assert not retained.is_error, text_of(retained)
    assert not recalled.is_error, text_of(recalled)
    assert recalled.structured_content["results"][0]["text"] == "Still here after the errors."


def test_only_retain_creates_the_store(tmp_path):
    """A typo in an agent's --db must not leave an empty store behind a read; reads of a
    memory not made yet answer with nothing."""
    db = tmp_path / "sub" / "mem.db"

    async def session() -> list[Any]:
        async with Client(server_params(db)) as client:
            reads = [
                await client.call_tool("recall", {"query": "anything"}),
                await client.call_tool("list", {}),
                await client.call_tool("forget", {"ids": [1], "dry_run": True}),
            ]
            created_by_reads = db.parent.exists()
            wrote = await client.call_tool("retain", {"text": "The first memory."})
            found = await client.call_tool("recall", {"query": "first memory"})
        return [reads, created_by_reads, wrote, found]

    (recalled, listed, forgot), created_by_reads, wrote, found = run(session)
    # An empty memory answers the first call an agent makes with no memories (issue 33: it
    # was a tool error, "no mem store"), and a forget has nothing to forget.
    assert not recalled.is_error and recalled.structured_content["results"] == []
    assert not listed.is_error and listed.structured_content["facts"] == []
    assert forgot.is_error and "no mem store" in text_of(forgot)
    assert not created_by_reads
    assert not wrote.is_error, text_of(wrote)
    assert found.structured_content["results"][0]["text"] == "The first memory."


def test_list_and_forget_tools(db_path):
    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(server_params(db_path)) as client:
            for text, tags in (
                ("The spare key is under the blue pot.", ["home"]),
                ("Maya prefers aisle seats on flights.", ["travel"]),
            ):
                r = await client.call_tool("retain", {"text": text, "tags": tags})
                assert not r.is_error, text_of(r)
            out["list"] = await client.call_tool("list", {})
            out["empty_forget"] = await client.call_tool("forget", {})
            out["dry"] = await client.call_tool("forget", {"tags": ["home"], "dry_run": True})
            out["forget"] = await client.call_tool("forget", {"tags": ["home"]})
            out["after"] = await client.call_tool("list", {})
        return out

    out = run(session)
    listed = out["list"].structured_content["facts"]
    # One text block holding the whole answer (an array made one block per fact).
    assert len(out["list"].content) == 1
    assert json.loads(out["list"].content[0].text) == {"facts": listed}
    assert sorted(x["text"] for x in listed) == [
        "Maya prefers aisle seats on flights.",
        "The spare key is under the blue pot.",
    ]
    # The same JSON as the CLI's list.
    r = CliRunner().invoke(app, ["--db", str(db_path), "list", "--format", "json"])
    assert r.exit_code == 0, r.stderr
    assert [x["text"] for x in json.loads(r.stdout)] == ["Maya prefers aisle seats on flights."]
    assert out["empty_forget"].is_error  # no selector: refuses to forget everything
    home_id = next(x["id"] for x in listed if "spare key" in x["text"])
    assert out["dry"].structured_content["would_forget"] == [home_id]
    assert out["forget"].structured_content["forgotten"] == [home_id]
    after = out["after"].structured_content["facts"]
    assert [x["text"] for x in after] == ["Maya prefers aisle seats on flights."]


def test_recall_defaults_come_from_the_settings(db_path, tmp_path):
    async def session() -> Any:
        params = server_params(
            db_path, MEM_MAX_TOKENS="150", MEM_CONFIG=str(tmp_path / "none.toml")
        )
        async with Client(params) as client:
            await client.call_tool("retain", {"text": "The boiler was serviced by Anton."})
            return (
                await client.call_tool("recall", {"query": "boiler"}),
                await client.call_tool("recall", {"query": "boiler", "max_tokens": 90}),
            )

    by_setting, by_argument = run(session)
    assert by_setting.structured_content["max_tokens"] == 150
    assert by_setting.structured_content["budget"] == "mid"
    assert by_argument.structured_content["max_tokens"] == 90


def test_protocol_errors_on_the_wire_and_the_server_keeps_serving(db_path):
    """Raw JSON-RPC, as a client in another language would speak it: malformed requests get
    JSON-RPC errors, and the same server answers the next request."""
    import select
    import time

    proc = server_process(
        db_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )

    def send(obj: Any) -> None:
        line = obj if isinstance(obj, str) else json.dumps(obj)
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    def reply(request_id: int | str | None) -> dict:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if ready:
                msg = json.loads(proc.stdout.readline())
                if "id" in msg and msg["id"] == request_id:
                    return msg
        raise AssertionError(f"no reply to request {request_id}")

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        assert reply(1)["result"]["serverInfo"]["name"] == "mem"
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}})
        assert reply(2)["error"]["code"] == -32602  # invalid params: no tool name
        send({"jsonrpc": "2.0", "id": 3, "method": "no/such/method"})
        assert reply(3)["error"]["code"] == -32601  # method not found
        # A line that is not a JSON-RPC message is answered (id null, JSON-RPC 2.0 section
        # 5.1), not dropped: a client waiting on it would otherwise wait forever.
        send("this is not JSON")
        assert reply(None)["error"]["code"] == -32700  # parse error
        # A lone surrogate escape is JSON but no text: answered with the request's id (the
        # SDK answered a parse error with id null, and the client waited on 7).
        send('{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": "\\ud800"}}')
        assert reply(7)["error"]["code"] == -32602
        send({"jsonrpc": "2.0", "result": "no id, no method"})
        assert reply(None)["error"]["code"] == -32600  # invalid request
        send("")  # a blank line is spacing, not a message: no answer (the next one is 8's)
        send({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": [1]})
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 8  # its id is readable: the answer carries it
        assert answer["error"]["code"] == -32600
        send({"jsonrpc": "1.0", "id": "nine", "method": "tools/list"})
        assert reply("nine")["error"]["code"] == -32600
        # A request whose id is no MCP id (a string or an integer) is an invalid request,
        # answered with id null: the SDK would read it as a notification and never answer.
        for bad_id in (None, 1.5, True, {"a": 1}, [10]):
            send({"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"})
            error = reply(None)["error"]
            assert error["code"] == -32600
            assert "id" in error["message"]
        call = {"name": "recall", "arguments": {"query": "x", "max_tokens": "lots"}}
        send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": call})
        assert reply(4)["result"]["isError"] is True
        send({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
        names = {t["name"] for t in reply(5)["result"]["tools"]}
        assert {"retain", "recall", "list", "forget"} <= names
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=60)
    assert code == 0  # the client closing stdin ends the server cleanly


def test_tool_errors_name_the_tools_arguments_not_cli_flags(db_path):
    """forget {} said "fact ids, --source-id, --document, --tag ..." to an agent, whose forget
    tool has no such names; it had no types argument either."""

    async def session() -> list[Any]:
        async with Client(server_params(db_path)) as client:
            await client.call_tool(
                "retain", {"text": "A world fact about Lisbon.", "type": "world"}
            )
            return [
                await client.call_tool("forget", {}),
                await client.call_tool("forget", {"query": "  "}),
                await client.call_tool("forget", {"types": ["world"], "dry_run": True}),
            ]

    nothing, blank, by_type = run(session)
    assert nothing.is_error and "source_id" in text_of(nothing)
    assert "--" not in text_of(nothing) and "--" not in text_of(blank)
    assert not by_type.is_error, text_of(by_type)
    assert len(by_type.structured_content["would_forget"]) == 1


def _raw_session(db_path: Path, lines: list[bytes]) -> tuple[list[dict], int]:
    """Write these lines (after initialize) to a server, close its stdin, and read every
    reply until it exits: (replies, exit code)."""

    head = [json.dumps(RAW_INITIALIZE).encode(), json.dumps(RAW_INITIALIZED).encode()]
    with server_process(
        db_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        out, _ = proc.communicate(b"\n".join([*head, *lines]) + b"\n", timeout=240)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out)
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return replies, done.returncode


def test_a_request_the_server_cannot_echo_is_answered_and_the_server_goes_on(db_path):
    """An id with a lone surrogate escape killed the server: its error reply echoed the id,
    the write failed and took the connection down (ExceptionGroup, exit 1), so the next
    request got no answer. Bytes that are not UTF-8 were read as U+FFFD and stored."""
    ping = b'{"jsonrpc": "2.0", "id": %d, "method": "ping"}'
    retain = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "retain", "arguments": {"text": "Cafe Lisboa opened."}},
    }
    not_utf8 = json.dumps(retain).encode().replace(b"Cafe", b"Caf\xe9")
    replies, code = _raw_session(
        db_path,
        [ping % 1, b'{"jsonrpc": "2.0", "id": "a\\ud800", "method": "ping"}', not_utf8, ping % 2],
    )
    assert code == 0
    by_id = {r.get("id"): r for r in replies}
    assert by_id[1]["result"] == {} and by_id[2]["result"] == {}
    assert by_id[None]["error"]["code"] in (-32600, -32602)  # the id cannot be echoed
    assert by_id[3]["error"]["code"] == -32602 and "UTF-8" in by_id[3]["error"]["message"]
    assert not db_path.exists() or Store(db_path).facts.fact_count() == 0


def test_requests_in_flight_when_the_client_closes_stdin_are_answered(db_path):
    """A client that sends its last request and closes its end got no answer to it, though
    its write was committed: the server stopped at end of input with the call in flight."""
    call = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "retain", "arguments": {"text": "Moved to Lagos in May."}},
    }
    replies, code = _raw_session(db_path, [json.dumps(call).encode()])
    assert code == 0
    answer = next((r for r in replies if r.get("id") == 5), None)
    assert answer is not None, replies
    assert answer["result"]["isError"] is False
    assert Store(db_path).facts.fact_count() == 1


def test_tools_refuse_unknown_arguments_and_values_of_another_type(db_path):
    """retain {"timestamp": ..., "tag": [...], "metadata": ...} stored the text as said now,
    untagged, with no error: the SDK dropped what the tool does not take. max_tokens true
    ran as 1 and dry_run "yes" as true."""

    async def session() -> list[Any]:
        async with Client(server_params(db_path)) as client:
            listed = await client.list_tools()
            return [
                {t.name: t.input_schema for t in listed.tools},
                await client.call_tool(
                    "retain", {"text": "Moved to Porto.", "timestamp": "2020-01-01"}
                ),
                await client.call_tool("recall", {"query": "Porto", "max_tokens": True}),
                await client.call_tool("forget", {"ids": [1], "dry_run": "yes"}),
                await client.call_tool("retain", {"text": "Moved to Porto.", "at": "2020-01-01"}),
                # JSON Schema's integer: a number with no fraction, as Python clients write it.
                await client.call_tool("recall", {"query": "Porto", "max_tokens": 200.0}),
                await client.call_tool("recall", {"query": "Porto", "max_tokens": 200.5}),
            ]

    schemas, unknown, bad_int, bad_bool, fine, integral, fraction = run(session)
    assert not integral.is_error, text_of(integral)
    assert integral.structured_content["max_tokens"] == 200
    assert fraction.is_error and "max_tokens" in text_of(fraction)
    assert all(schema.get("additionalProperties") is False for schema in schemas.values())
    assert unknown.is_error and "timestamp" in text_of(unknown)
    assert bad_int.is_error and "max_tokens" in text_of(bad_int)
    assert bad_bool.is_error and "dry_run" in text_of(bad_bool)
    assert not fine.is_error
    (stored,) = fine.structured_content["stored"]
    assert stored["mentioned_at"].startswith("2020-01-01")
    assert Store(db_path).facts.fact_count() == 1


def test_an_empty_bank_or_time_is_an_error_not_the_default(db_path):
    """bank "" and at "" fell back to the server's bank and to now, where the CLI's --bank ''
    and --at '' are errors."""

    async def session() -> list[Any]:
        async with Client(server_params(db_path)) as client:
            return [
                await client.call_tool("retain", {"text": "Moved to Porto.", "bank": ""}),
                await client.call_tool("retain", {"text": "Moved to Porto.", "at": ""}),
                await client.call_tool("recall", {"query": "Porto", "bank": " "}),
                await client.call_tool("recall", {"query": "Porto", "now": ""}),
            ]

    for result in run(session):
        assert result.is_error, text_of(result)
    assert not db_path.exists() or Store(db_path).facts.fact_count() == 0


def test_a_client_gone_mid_call_ends_the_server_quietly(db_path):
    """A client that closed both pipes while a call ran: the server, answering the call at
    end of input, died of the closed stdout (unexpected ExceptionGroup, exit 1)."""
    import time

    proc = server_process(
        db_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    text = " ".join(f"gamma{i}" for i in range(3000))
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "retain", "arguments": {"text": text}},
    }
    for message in (RAW_INITIALIZE, RAW_INITIALIZED, call):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0
    time.sleep(0.3)  # the call is running
    proc.stdin.close()
    proc.stdout.close()
    code = proc.wait(timeout=180)
    stderr = proc.stderr.read().decode()
    assert code == 0, stderr
    assert "error" not in stderr, stderr


def test_retain_names_what_it_may_supersede_as_the_cli_does(db_path):
    """`mem retain --json` names, for each stored fact, the older facts of the same speaker
    it nearly repeats ("possibly_supersedes"); the MCP tool answered without them."""
    r = CliRunner().invoke(
        app,
        ["--db", str(db_path), "retain", "--at", "2026-01-05", "--context", "Maya",
         "Maya's phone number is 555-0100."],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    said = {"text": "Maya's phone number is 555-0199.", "at": "2026-02-05", "context": "Maya"}

    async def session():
        async with Client(server_params(db_path)) as client:
            return await client.call_tool("retain", said)

    result = run(session)
    assert not result.is_error, text_of(result)
    (stored,) = result.structured_content["stored"]
    assert stored["possibly_supersedes"] == [1]
    # The CLI, on a copy of the store as it was before: the same answer.
    twin = db_path.with_name("twin.db")
    for args in (
        ["retain", "--at", "2026-01-05", "--context", "Maya", "Maya's phone number is 555-0100."],
        ["retain", "--json", "--at", said["at"], "--context", "Maya", said["text"]],
    ):
        r = CliRunner().invoke(app, ["--db", str(twin), *args])
        assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["stored"][0]["possibly_supersedes"] == [1]


def test_a_store_replaced_or_deleted_while_the_server_runs_is_opened_again(tmp_path):
    """The server kept one connection for its life: after a backup was restored over the
    store (an atomic rename), its next retain wrote WAL frames meant for the old file into
    the new one's WAL ("database disk image is malformed"); after the store was deleted,
    reads answered from the deleted file and a retain went into it, lost."""
    db = tmp_path / "mem.db"
    backup = tmp_path / "backup.db"
    for path, text in ((db, "The first store's note."), (backup, "The backup's own note.")):
        r = CliRunner().invoke(app, ["--db", str(path), "retain", text])
        assert r.exit_code == 0, r.stderr

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(server_params(db)) as client:
            await client.call_tool("recall", {"query": "note"})
            os.replace(backup, db)  # a restore from backup while the server is up
            out["after_restore"] = await client.call_tool(
                "retain", {"text": "Written after the restore."}
            )
            out["listed"] = await client.call_tool("list", {})
            db.unlink()
            for suffix in ("-wal", "-shm"):
                db.with_name(db.name + suffix).unlink(missing_ok=True)
            out["gone"] = await client.call_tool("recall", {"query": "note"})
            out["made_again"] = await client.call_tool("retain", {"text": "A new beginning."})
        return out

    out = run(session)
    assert not out["after_restore"].is_error, text_of(out["after_restore"])
    texts = [f["text"] for f in out["listed"].structured_content["facts"]]
    assert sorted(texts) == ["The backup's own note.", "Written after the restore."], texts
    gone = out["gone"]  # no store at the path: no memories (not the deleted file's)
    assert not gone.is_error and gone.structured_content["results"] == [], text_of(gone)
    assert not out["made_again"].is_error, text_of(out["made_again"])
    with Store(db) as s:
        assert s.facts.fact_count() == 1
    r = CliRunner().invoke(app, ["--db", str(db), "doctor"])
    assert r.exit_code == 0, r.stdout + r.stderr


def test_a_refused_last_line_is_answered_before_the_server_exits(db_path):
    """A request the server refuses itself (an id that is no MCP id), sent last: its error
    was sometimes never written (3 runs in 20), the writer cancelled at end of input."""
    bad = [b'{"jsonrpc": "2.0", "id": null, "method": "ping"}']
    for _ in range(12):
        replies, code = _raw_session(db_path, bad)
        assert code == 0
        assert [r.get("id") for r in replies] == [RAW_INITIALIZE["id"], None], replies


def test_a_bad_label_is_blamed_on_its_own_argument(db_path):
    """A bad tag, context or document_id was reported as "text: a tag is empty ..."."""

    async def session():
        async with Client(server_params(db_path)) as client:
            return [
                await client.call_tool("retain", {"text": "Fine text.", **bad})
                for bad in ({"tags": [" "]}, {"document_id": "a\nb"})
            ]

    for result, named in zip(run(session), ("tag", "document_id")):
        assert result.is_error
        message = text_of(result)
        assert "text: " not in message and named in message, message
    assert not db_path.exists() or Store(db_path).facts.fact_count() == 0
