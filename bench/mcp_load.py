"""`mem mcp` under load, over stdio and over streamable HTTP, with the real MCP client SDK.

    python bench/mcp_load.py build  --dir DIR [--facts 10000]
    python bench/mcp_load.py recall --dir DIR [--transports stdio,http] [--clients 1,4,16]
                                   [--recalls 48] [--import-items 5000]
    python bench/mcp_load.py load   --dir DIR [--clients 16] [--calls 200]
    python bench/mcp_load.py recall --dir DIR --base-code OLD [--clients 1,4]  # before
    python bench/mcp_load.py recall --dir DIR --one-call --import-items 2000  # one long retain

Text: sentences of the user and assistant turns of LongMemEval's oracle split
(../shared/datasets/longmemeval-oracle.json, read by path; bench/scale.py's load_sentences),
one sentence an item, its session its document, its speaker its context. `build` retains
the first --facts of them into DIR/base.db (`mem retain --jsonl`, once; kept for later runs).

`recall`: for each transport, a copy of the base store and one server on it. Recall latency
(each call as the client sees it, p50 / p95) for 1, 4 and 16 concurrent clients, first with
the server otherwise idle, then while one more client imports --import-items new sentences
(one retain call a sentence, with its speaker and time). Over stdio a server has one client
session: the "clients" are concurrent callers on it (an agent host's parallel tool calls);
over HTTP each client is a session of its own. Every recall's answer is counted as sent (its
text content and its structuredContent as compact JSON, cl100k) against max_tokens.
Questions: LongMemEval's, asked in turn.

`load`: one HTTP server on a copy of the base store; --clients clients make --calls mixed
calls each at once (recall, retain, list, show, correct, forget, stats, banks), each keeping
the ids it wrote; afterwards every acknowledged write is checked in the store: each retained
fact there with its text, each corrected one closed by its correction, each forgotten one
gone, and the store's count equal to the base plus what was acknowledged. Prints the
figures; long runs, not tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import DATASET, load_queries, load_sentences  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
BASE_CODE = ""  # --base-code DIR: serve with the memcli in DIR (stdio only)
MEM = [sys.executable, "-m", "memcli"]


# -- the store --------------------------------------------------------------------------------


def build(folder: Path, facts: int) -> Path:
    """DIR/base.db with the first `facts` sentences (kept; built once)."""
    from memcli.store import Store

    base = folder / "base.db"
    if base.exists():
        with Store(base, create=False) as store:
            have = store.facts.fact_count()
        print(f"base store {base}: {have} facts (kept)", file=sys.stderr)
        return base
    folder.mkdir(parents=True, exist_ok=True)
    items = load_sentences(DATASET)[:facts]
    jsonl = folder / "base.jsonl"
    jsonl.write_text("".join(json.dumps(item) + "\n" for item in items))
    t0 = time.perf_counter()
    subprocess.run([*MEM, "--db", str(base), "retain", "--jsonl", str(jsonl)], check=True)
    print(f"built {base}: {len(items)} items in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    with Store(base) as store:
        store.checkpoint()
    return base


def copy_store(base: Path, to: Path) -> Path:
    """A fresh copy of the base store (no process has either open)."""
    for end in ("", "-wal", "-shm"):
        Path(f"{to}{end}").unlink(missing_ok=True)
    shutil.copyfile(base, to)
    return to


def import_items(n: int) -> list[dict]:
    """The last n sentences of the dataset (none of them in the base store), as retain
    arguments: one item a call, with its speaker and time, as an agent importing a chat
    would send them."""
    return [
        {"text": it["text"], "context": it["context"], "at": it["timestamp"]}
        for it in load_sentences(DATASET)[-n:]
    ]


# -- servers and clients --------------------------------------------------------------------


class HttpServer:
    def __init__(self, db: Path) -> None:
        env = {**os.environ, "MEM_MCP_TOKEN": TOKEN}
        self.proc = subprocess.Popen(
            [*MEM, "--db", str(db), "mcp", "--http", "127.0.0.1:0"],
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stderr.readline()
        found = re.search(r"http://\S+/mcp", line)
        if not found:
            raise SystemExit(f"the server did not start: {line}")
        self.url = found.group(0)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=120)


@asynccontextmanager
async def http_session(url: str):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(900)) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


@asynccontextmanager
async def stdio_session(db: Path):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k.startswith(("MEM_", "HOME", "XDG_", "PATH"))}
    if BASE_CODE:  # another version of memcli, for a before/after in one run
        env["PYTHONPATH"] = BASE_CODE
    # (-m puts the working folder first on sys.path: for --base-code it must be that one.)
    params = StdioServerParameters(
        command=MEM[0],
        args=[*MEM[1:], "--db", str(db), "mcp"],
        env=env,
        cwd=BASE_CODE or None,
    )
    async with Client(params, read_timeout_seconds=900) as client:
        yield client


def sent_tokens(result: Any) -> int:
    from memcli.tokens import count_tokens

    text = sum(count_tokens(c.text) for c in result.content if getattr(c, "text", None))
    wire = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
    return text + count_tokens(wire)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# -- recall under import ----------------------------------------------------------------------


async def recall_phase(
    sessions: list[Any], queries: list[str], per_client: int, tokens: list[tuple[int, int]]
) -> list[float]:
    """Each session recalls per_client questions in turn, all at once; latencies in ms."""
    latencies: list[float] = []

    async def one(n: int, client: Any) -> None:
        for i in range(per_client):
            query = queries[(n * per_client + i) % len(queries)]
            t0 = time.perf_counter()
            result = await client.call_tool("recall", {"query": query})
            latencies.append((time.perf_counter() - t0) * 1000)
            if result.is_error:
                raise SystemExit(f"recall failed: {result.content[0].text}")
            tokens.append((sent_tokens(result), 4096))

    await asyncio.gather(*(one(n, c) for n, c in enumerate(sessions)))
    return latencies


async def run_import(client: Any, items: list[dict], state: dict[str, Any]) -> None:
    """One client retains every item in turn (the import beside the recalls)."""
    t0 = time.perf_counter()
    stored = 0
    for item in items:
        done = await client.call_tool("retain", item)
        if done.is_error:
            raise SystemExit(f"retain failed: {done.content[0].text}")
        stored += done.structured_content["summary"]["facts"]
    state["seconds"] = time.perf_counter() - t0
    state["facts"] = stored


async def run_recall(transport: str, db: Path, args: argparse.Namespace) -> list[dict]:
    queries = [q for q, _ in load_queries(DATASET, 200, random.Random(7))]
    texts = import_items(args.import_items)
    if args.one_call:  # the whole import as one long retain (a pasted file, a 5 MB note)
        texts = [{"text": " ".join(item["text"] for item in texts)}]
    rows: list[dict] = []
    server = HttpServer(db) if transport == "http" else None
    counts = [int(c) for c in args.clients.split(",")]
    try:

        def opened():
            return http_session(server.url) if server else stdio_session(db)

        async with opened() as first:
            await first.call_tool("recall", {"query": "warm up"})  # loads the models
            extra = []
            # HTTP: a session per client; stdio: the one session, called concurrently.
            for _ in range(max(counts) - 1 if server else 0):
                extra.append(opened())
            sessions = [first] + [await cm.__aenter__() for cm in extra]
            try:
                for label in ("idle", "importing"):
                    importer = None
                    import_state: dict[str, Any] = {}
                    if label == "importing":
                        import_cm = opened() if server else None
                        import_client = await import_cm.__aenter__() if import_cm else first

                        importer = asyncio.create_task(
                            run_import(import_client, texts, import_state)
                        )
                        await asyncio.sleep(2.0)  # the import is under way
                    for n in counts:
                        tokens: list[tuple[int, int]] = []
                        per_client = max(8, args.recalls // n)
                        # HTTP: n sessions; stdio: n callers on the one session.
                        callers = sessions[:n] if server else [first] * n
                        t0 = time.perf_counter()
                        lat = await recall_phase(callers, queries, per_client, tokens)
                        rows.append(
                            {
                                "transport": transport,
                                "phase": label,
                                "clients": n,
                                "recalls": len(lat),
                                "p50_ms": round(statistics.median(lat)),
                                "p95_ms": round(pct(lat, 0.95)),
                                "max_ms": round(max(lat)),
                                "wall_s": round(time.perf_counter() - t0, 1),
                                "import_running": importer is not None and not importer.done(),
                                "tokens_mean": round(statistics.mean(t for t, _ in tokens)),
                                "tokens_max": max(t for t, _ in tokens),
                                "over_budget": sum(1 for t, b in tokens if t > b),
                            }
                        )
                        print(json.dumps(rows[-1]), file=sys.stderr)
                    if importer is not None:
                        await importer
                        rows.append(
                            {
                                "transport": transport,
                                "phase": "import",
                                "items": len(texts),
                                "facts": import_state["facts"],
                                "seconds": round(import_state["seconds"], 1),
                            }
                        )
                        print(json.dumps(rows[-1]), file=sys.stderr)
                        if import_cm is not None:
                            await import_cm.__aexit__(None, None, None)
            finally:
                for cm in reversed(extra):
                    await cm.__aexit__(None, None, None)
    finally:
        if server:
            server.stop()
    return rows


# -- load -------------------------------------------------------------------------------------


async def run_load(db: Path, args: argparse.Namespace) -> dict:
    from memcli.store import Store

    with Store(db, create=False) as store:
        base_count = store.facts.fact_count()
    queries = [q for q, _ in load_queries(DATASET, 100, random.Random(3))]
    server = HttpServer(db)
    unexpected: list[str] = []
    ledgers: list[dict] = []
    calls = {"n": 0}
    latencies: dict[str, list[float]] = {}

    async def agent(n: int) -> None:
        rng = random.Random(1000 + n)
        mine: dict[int, str] = {}  # fact id -> text, current and not forgotten
        corrected: dict[int, int] = {}  # old id -> new id
        texts: dict[int, str] = {}  # every fact it wrote, current or not
        forgotten: list[int] = []
        async with http_session(server.url) as client:

            async def call(tool: str, arguments: dict) -> Any:
                t0 = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                latencies.setdefault(tool, []).append((time.perf_counter() - t0) * 1000)
                calls["n"] += 1
                if result.is_error:
                    unexpected.append(f"{tool} {arguments}: {result.content[0].text}")
                    return None
                return result.structured_content

            for i in range(args.calls):
                roll = rng.random()
                if roll < 0.25 or not mine:
                    text = f"Client {n} noted item {i}: the crate code is K{n:02d}{i:03d}."
                    done = await call("retain", {"text": text, "tags": [f"c{n}"]})
                    if done is not None:
                        for fact in done["stored"]:
                            mine[fact["id"]] = texts[fact["id"]] = fact["text"]
                elif roll < 0.6:
                    await call("recall", {"query": rng.choice(queries), "max_tokens": 1500})
                elif roll < 0.7:
                    await call("list", {"tags": [f"c{n}"], "limit": 10})
                elif roll < 0.78:
                    await call("show", {"ids": [rng.choice(list(mine))]})
                elif roll < 0.86:
                    old = rng.choice(list(mine))
                    text = f"Client {n} corrected item {i}: the crate code is Q{n:02d}{i:03d}."
                    done = await call("correct", {"fact_id": old, "text": text})
                    if done is not None:
                        (new,) = done["by"]
                        corrected[old] = new
                        mine.pop(old)
                        mine[new] = texts[new] = text
                elif roll < 0.93:
                    gone = rng.choice(list(mine))
                    done = await call("forget", {"ids": [gone]})
                    if done is not None and done["forgotten"] == [gone]:
                        forgotten.append(gone)
                        mine.pop(gone)
                        # A forgotten correction makes the fact it closed current again.
                        for old, new in list(corrected.items()):
                            if new == gone:
                                corrected.pop(old)
                                mine[old] = texts[old]
                elif roll < 0.97:
                    await call("stats", {})
                else:
                    await call("banks", {})
        ledgers.append({"mine": mine, "corrected": corrected, "forgotten": forgotten})

    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(agent(n) for n in range(args.clients)))
    finally:
        wall = time.perf_counter() - t0
        server.stop()
    lost, wrong = [], []
    with Store(db, create=False) as store:
        total = store.facts.fact_count()
        for ledger in ledgers:
            ids = list(ledger["mine"]) + list(ledger["corrected"]) + ledger["forgotten"]
            facts = store.facts.facts_by_id(ids)
            for fid, text in ledger["mine"].items():
                fact = facts.get(fid)
                if fact is None or fact.text != text or fact.invalid_at is not None:
                    lost.append(fid)
            for old in ledger["corrected"]:
                fact = facts.get(old)
                if fact is None or fact.superseded_by is None:
                    wrong.append(old)
            wrong += [fid for fid in ledger["forgotten"] if fid in facts]
    expected = base_count + sum(
        len(lg["mine"]) + len(lg["corrected"]) for lg in ledgers
    )  # current facts, and the closed versions corrections keep
    return {
        "clients": args.clients,
        "calls": calls["n"],
        "wall_s": round(wall, 1),
        "unexpected_errors": len(unexpected),
        "errors_by_tool": {
            tool: sum(1 for e in unexpected if e.startswith(tool + " "))
            for tool in sorted({e.split(" ", 1)[0] for e in unexpected})
        },
        "first_errors": unexpected[:3],
        "lost_writes": len(lost),
        "wrong_state": len(wrong),
        "facts_before": base_count,
        "facts_after": total,
        "facts_expected": expected,
        "latency_ms": {
            tool: {"n": len(v), "p50": round(statistics.median(v)), "p95": round(pct(v, 0.95))}
            for tool, v in sorted(latencies.items())
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("build", "recall", "load"))
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--facts", type=int, default=10000)
    parser.add_argument("--transports", default="stdio,http")
    parser.add_argument("--clients", default=None)
    parser.add_argument("--recalls", type=int, default=48, help="recalls per phase, all clients")
    parser.add_argument("--import-items", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument(
        "--one-call", action="store_true", help="import the items as one retain of their text"
    )
    parser.add_argument(
        "--base-code",
        type=Path,
        help="serve (stdio) with the memcli package in this folder, e.g. `git archive "
        "46a4e63 memcli | tar -x -C DIR`: the figures before this work, in the same run",
    )
    args = parser.parse_args()
    if args.base_code:
        global BASE_CODE
        BASE_CODE = str(args.base_code.resolve())
        args.transports = "stdio"
    base = build(args.dir, args.facts)
    if args.what == "build":
        return
    if args.what == "recall":
        args.clients = args.clients or "1,4,16"
        rows = []
        for transport in args.transports.split(","):
            tag = ("-base" if BASE_CODE else "") + ("-one" if args.one_call else "")
            db = copy_store(base, args.dir / f"recall-{transport}{tag}.db")
            rows += asyncio.run(run_recall(transport, db, args))
        print(json.dumps(rows, indent=1))
        return
    args.clients = int(args.clients or 16)
    db = copy_store(base, args.dir / "load.db")
    print(json.dumps(asyncio.run(run_load(db, args)), indent=1))


if __name__ == "__main__":
    main()
