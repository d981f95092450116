"""`mem mcp --http HOST:PORT`: MCP over streamable HTTP (the official SDK, path /mcp), one
store shared by many clients, a bearer token on every request when one is set and required
off loopback, and a health check. Driven by the SDK's own HTTP client on loopback."""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import anyio
import httpx2

from tests.mcp_clients import TOKEN, HttpServer, fact_count, http_client, mem_command, text_of
from tests.test_mcp import run


def test_many_clients_share_one_store_behind_a_token(db_path):
    server = HttpServer(db_path)
    try:

        async def session() -> dict[str, Any]:
            out: dict[str, Any] = {}
            health = server.url.replace("/mcp", "/health")
            async with httpx2.AsyncClient(timeout=60) as plain:
                out["no_token"] = await plain.post(server.url, json={"jsonrpc": "2.0"})
                out["health_no_token"] = await plain.get(health)
                out["wrong_token"] = await plain.get(
                    health, headers={"Authorization": "Bearer not-the-token-at-all"}
                )
                out["health"] = await plain.get(health, headers=server.headers())

            async def agent(n: int) -> list[Any]:
                async with http_client(server) as client:
                    done = [
                        await client.call_tool(
                            "retain", {"text": f"Agent {n} parked the van in bay {n}.", "at": at}
                        )
                        for at in ("2026-05-01", "2026-05-02")
                    ]
                    return done

            out["retained"] = await asyncio.gather(*(agent(n) for n in range(4)))
            async with http_client(server) as client:
                out["recall"] = await client.call_tool(
                    "recall", {"query": "Agent 2 parked the van", "limit": 1}
                )
                out["stats"] = await client.call_tool("stats", {})
            with anyio.move_on_after(120):
                try:
                    async with http_client(server, token="wrong-token-0123456789") as client:
                        out["sdk_wrong_token"] = await client.call_tool("stats", {})
                except Exception as exc:  # noqa: BLE001 - the SDK raises on HTTP 401
                    out["sdk_wrong_token"] = exc
            return out

        out = run(session)
    finally:
        server.stop()
    for key in ("no_token", "health_no_token", "wrong_token"):
        assert out[key].status_code == 401, key
        assert out[key].headers["www-authenticate"].startswith("Bearer")
    assert out["health"].status_code == 200 and out["health"].json()["status"] == "ok"
    for calls in out["retained"]:
        for result in calls:
            assert not result.is_error, text_of(result)
    assert out["recall"].structured_content["results"][0]["text"] == (
        "Agent 2 parked the van in bay 2."
    )
    assert out["stats"].structured_content["facts"] == 8
    assert not hasattr(out["sdk_wrong_token"], "structured_content")
    assert fact_count(db_path) == 8


def test_a_token_file_named_in_the_config(db_path, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("from-the-file-0123456789\n")
    config = tmp_path / "config.toml"
    config.write_text(f'mcp_token_file = "{token_file}"\n')
    server = HttpServer(db_path, token=None, MEM_CONFIG=str(config))
    try:

        async def session() -> tuple[int, Any]:
            async with httpx2.AsyncClient(timeout=60) as plain:
                refused = await plain.get(server.url.replace("/mcp", "/health"))
            async with http_client(server, token="from-the-file-0123456789") as client:
                return refused.status_code, await client.call_tool("banks", {})

        refused, banks = run(session)
    finally:
        server.stop()
    assert refused == 401
    assert banks.structured_content == {"banks": []}


def test_off_loopback_only_with_a_token_and_bad_addresses_are_refused(db_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(db_path.parent), "MEM_CONFIG": "/nonexistent"}
    for address, code, said in (
        ("0.0.0.0:0", 1, "without a token"),
        ("nowhere", 2, "HOST:PORT"),
        ("127.0.0.1:99999", 2, "HOST:PORT"),
    ):
        done = subprocess.run(
            [*mem_command(), "--db", str(db_path), "mcp", "--http", address],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code, (address, done.stderr)
        assert said in done.stderr and done.stderr.count("\n") == 1, done.stderr
    # A token too short to be safe is refused; a good one serves every interface.
    short = subprocess.run(
        [*mem_command(), "--db", str(db_path), "mcp", "--http", "0.0.0.0:0"],
        env={**env, "MEM_MCP_TOKEN": "short"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert short.returncode == 1 and "too short" in short.stderr, short.stderr
    server = HttpServer(db_path, token=TOKEN, address="0.0.0.0:0")
    try:

        async def session() -> Any:
            async with http_client(server) as client:
                return await client.call_tool("banks", {})

        banks = run(session)
    finally:
        server.stop()
    assert banks.structured_content == {"banks": []}
    assert not db_path.exists()  # serving made no store
