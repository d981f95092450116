"""Commands for agents: `mem mcp` (a Model Context Protocol server on stdin/stdout, or over
streamable HTTP with --http)."""

from __future__ import annotations

from typing import Annotated

import typer

from memcli.cliutil import state


def mcp(
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve over streamable HTTP at http://HOST:PORT/mcp (health: /health) "
            "instead of stdio; many clients share the store. A bearer token ($MEM_MCP_TOKEN "
            "or the config's mcp_token_file) is checked on every request when set, and is "
            "required to bind anything but loopback.",
        ),
    ] = None,
) -> None:
    """Serve mem to AI agents over the Model Context Protocol (stdio, or HTTP with --http).

    Tools: retain, recall, list, show, correct, forget, banks, stats. The store and the
    models load once per server; reads run in parallel, writes one at a time. Add it to an
    MCP client's config as the command `mem` with the argument `mcp`.

    Example:  mem --db ~/notes/mem.db mcp

      MEM_MCP_TOKEN=$(cat ~/.mem-token) mem mcp --http 0.0.0.0:8765
    """
    import os

    from memcli import mcp_server
    from memcli.cliutil import configured, errors, fail, info
    from memcli.memory import Memory

    token = None
    if http is not None:
        try:
            mcp_server.parse_address(http)
            token = mcp_server.bearer_token(
                os.environ.get("MEM_MCP_TOKEN"), configured("mcp_token_file")
            )
        except mcp_server.HttpError as exc:
            fail(f"--http: {exc}", 2 if "HOST:PORT" in str(exc) else 1)
    with errors():
        memory = Memory(
            state.db,
            state.bank,
            embedder=configured("embedder"),
            reranker=configured("reranker"),
            budget=configured("budget"),
            max_tokens=configured("max_tokens"),
            forget_limit=configured("forget_limit"),
        )
    if http is None:
        mcp_server.serve(memory)
        return
    try:
        mcp_server.serve_http(
            memory,
            http,
            token,
            announce=lambda url: info(
                f"mem: serving MCP at {url}" + (" (bearer token required)" if token else "")
            ),
        )
    except mcp_server.HttpError as exc:
        fail(f"--http: {exc}")


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)
