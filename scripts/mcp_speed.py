"""How fast `mem mcp` answers once running, against a `mem recall` process per query.

    python scripts/mcp_speed.py --db .demo/mem.db [--runs 3]

Starts the server with the real MCP client SDK, asks a few recalls in one session, and
prints the first recall (it loads the embedder and the tokenizer) and the median of the
rest; then times the same queries as separate `mem recall` processes. Medians over --runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

QUERIES = [
    "Lisbon trip",
    "When does Maya fly?",
    "Priya thesis",
    "bike rental",
    "New Year's Eve",
    "Alfama",
    "pastries",
]


def mem_command() -> list[str]:
    script = Path(sys.executable).with_name("mem")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memcli"]


async def one_session(db: Path) -> tuple[float, float, float]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    cmd = mem_command()
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "--db", str(db), "mcp"])
    t0 = time.perf_counter()
    async with Client(params) as client:
        connected = time.perf_counter() - t0
        times = []
        for q in QUERIES:
            start = time.perf_counter()
            result = await client.call_tool("recall", {"query": q, "now": "2026-11-20"})
            times.append(time.perf_counter() - start)
            if result.is_error:
                raise SystemExit(f"recall failed: {result.content}")
    return connected, times[0], statistics.median(times[1:])


def cli_recall(db: Path, query: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [*mem_command(), "--db", str(db), "recall", query, "--now", "2026-11-20"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sessions = [asyncio.run(one_session(args.db)) for _ in range(args.runs)]
    cli = [cli_recall(args.db, QUERIES[i % len(QUERIES)]) for i in range(args.runs)]
    connect, first, warm = (statistics.median(x) for x in zip(*sessions))
    print(
        f"mem mcp: start + initialize {connect:.2f} s, first recall {first * 1000:.0f} ms, "
        f"then {warm * 1000:.0f} ms a recall (medians of {args.runs} sessions of "
        f"{len(QUERIES)} recalls)"
    )
    print(f"mem recall process: {statistics.median(cli):.2f} s (median of {args.runs})")


if __name__ == "__main__":
    main()
