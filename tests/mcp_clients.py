"""Connecting the real MCP client SDK to `mem mcp`, over stdio or over streamable HTTP, and
filling stores for the tests that drive it (tests/test_mcp_agents.py, tests/test_mcp_http.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client

from memcli.store import Store, content_hash
from tests.test_mcp import server_params

TOKEN = "test-token-0123456789abcdef"


def mem_command() -> list[str]:
    script = Path(sys.executable).with_name("mem")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memcli"]


class HttpServer:
    """`mem mcp --http 127.0.0.1:0` as a process; its URL read from the line it prints."""

    def __init__(
        self,
        db: Path,
        *extra: str,
        token: str | None = TOKEN,
        address: str = "127.0.0.1:0",
        **env: str,
    ) -> None:
        environ = {k: v for k, v in os.environ.items() if k != "MEM_MCP_TOKEN"}
        if token is not None:
            environ["MEM_MCP_TOKEN"] = token
        environ.update(env)
        self.token = token
        self.proc = subprocess.Popen(
            [*mem_command(), "--db", str(db), *extra, "mcp", "--http", address],
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stderr.readline()
        found = re.search(r"http://\S+/mcp", line)
        if not found:
            self.stop()
            raise AssertionError(f"the server did not start: {line}")
        # (A server on every interface is reached here through loopback.)
        self.url = found.group(0).replace("//0.0.0.0:", "//127.0.0.1:")

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def stop(self) -> str:
        """Stop it (SIGTERM); what it wrote on stderr after its first line."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.stderr.read()


@asynccontextmanager
async def http_client(server: HttpServer, token: str | None = None) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, with the server's bearer token (or `token`)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else server.headers()
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(240)) as http:
        async with Client(streamable_http_client(server.url, http_client=http)) as client:
            yield client


@asynccontextmanager
async def connect(transport: str, db: Path, *extra: str, **env: str) -> AsyncIterator[Client]:
    """A client of a fresh `mem mcp` on db, over "stdio" or "http"."""
    if transport == "stdio":
        async with Client(server_params(db, *extra, **env)) as client:
            yield client
        return
    server = HttpServer(db, *extra, **env)
    try:
        async with http_client(server) as client:
            yield client
    finally:
        server.stop()


T0 = datetime(2026, 1, 1, 9, 0)


def fill_bank(
    db: Path,
    embedder: Any,
    texts: list[str],
    *,
    tags: dict[int, list[str]] | None = None,
    bank: str = "default",
) -> list[int]:
    """A bank of these facts, written straight into the store (a retain of thousands would
    embed for minutes): one a minute from T0, the bank bound to the test embedder with
    unit vectors of its dimension (random: the tests here are not about ranking), so the
    server can retain and recall into it. Returns the fact ids."""
    rng = np.random.default_rng(7)
    ids = []
    with Store(db) as store, store.atomic():
        bank_id = store.banks.ensure_bank(bank, T0)
        store.vectors.ensure_vectors(bank_id, embedder.name, embedder.fingerprint, embedder.dim)
        for i, text in enumerate(texts):
            vector = rng.standard_normal(embedder.dim).astype(np.float32)
            vector /= np.linalg.norm(vector)
            at = T0 + timedelta(minutes=i)
            ids.append(
                store.facts.insert_fact(
                    bank_id=bank_id,
                    text=text,
                    context=None,
                    fact_type="world",
                    mentioned_at=at,
                    occurred_start=None,
                    occurred_end=None,
                    tags=(tags or {}).get(i, []),
                    metadata={},
                    source_id=None,
                    document_id=None,
                    chunk_id=None,
                    content_hash=content_hash(text, None, "world", at, None, None),
                    entity_names=[],
                    embedding=vector,
                    now=at,
                )
            )
    return ids


def fact_count(db: Path) -> int:
    with Store(db) as store:
        return store.facts.fact_count()


def text_of(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)
