"""Commands for agents: `mem mcp` (a Model Context Protocol server on stdin/stdout)."""

from __future__ import annotations

import typer

from memcli.cliutil import state


def mcp() -> None:
    """Serve mem to an AI agent over the Model Context Protocol (stdio).

    Tools: retain, recall (and list, forget). The store and the models load once per server.
    Add it to an MCP client's config as the command `mem` with the argument `mcp`.

    Example:  mem --db ~/notes/mem.db mcp
    """
    from memcli import mcp_server
    from memcli.cliutil import configured
    from memcli.memory import Memory

    memory = Memory(
        state.db,
        state.bank,
        embedder=configured("embedder"),
        reranker=configured("reranker"),
        budget=configured("budget"),
        max_tokens=configured("max_tokens"),
    )
    mcp_server.serve(memory)


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)
