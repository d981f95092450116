"""`mem mcp` as agents use it (issue 33), through the real MCP client SDK over stdio and over
streamable HTTP: every tool annotated, no call that deletes a bank by accident, answers that
fit their token budget as sent, the tools of the whole lifecycle, an empty memory that
answers, and a cancelled retain that writes nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest

from memcli.store import Store
from memcli.tokens import count_tokens
from tests.mcp_clients import connect, fact_count, fill_bank, text_of
from tests.test_mcp import run

TRANSPORTS = ["stdio", "http"]


def sent_tokens(result: Any) -> int:
    """What an agent receives, counted as the project counts tokens: every text block, and
    the structured content as the compact JSON it travels as."""
    text = sum(count_tokens(c.text) for c in result.content if getattr(c, "text", None))
    structured = result.structured_content
    if structured is None:
        return text
    wire = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    return text + count_tokens(wire)


# -- safety ---------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_no_call_deletes_a_bank_by_accident(transport, db_path, embedder):
    """forget {"since": "1900-01-01"} removed all 2,000 facts of a bank, unasked."""
    texts = [f"Note {i} about the harbour survey, item {i}." for i in range(2000)]
    ids = fill_bank(db_path, embedder, texts, tags={i: ["draft"] for i in range(5)})

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect(transport, db_path) as client:
            out["tools"] = (await client.list_tools()).tools
            out["everything"] = await client.call_tool("forget", {"since": "1900-01-01"})
            out["everything_confirmed"] = await client.call_tool(
                "forget", {"since": "1900-01-01", "confirm": "yes"}
            )
            out["count_after_bulk"] = fact_count(db_path)
            out["preview"] = await client.call_tool("forget", {"tags": ["draft"]})
            out["count_after_preview"] = fact_count(db_path)
            out["wrong_token"] = await client.call_tool(
                "forget", {"tags": ["draft"], "confirm": "0" * 20}
            )
            token = (out["preview"].structured_content or {}).get("confirm")
            # The token is this selection's: another selection cannot use it.
            out["other_selection"] = await client.call_tool(
                "forget", {"before": "2026-01-01T09:03:00Z", "confirm": token}
            )
            out["confirmed"] = await client.call_tool(
                "forget", {"tags": ["draft"], "confirm": token}
            )
            out["again"] = await client.call_tool("forget", {"tags": ["draft"], "confirm": token})
            out["by_ids"] = await client.call_tool("forget", {"ids": ids[10:12]})
            out["too_many_ids"] = await client.call_tool("forget", {"ids": ids[100:301]})
            out["ids_dry_run"] = await client.call_tool(
                "forget", {"ids": ids[20:22], "dry_run": True}
            )
        return out

    out = run(session)
    for tool in out["tools"]:
        hints = tool.annotations
        assert hints is not None, tool.name
        assert hints.open_world_hint is False, tool.name
        for hint in ("read_only_hint", "destructive_hint", "idempotent_hint"):
            assert isinstance(getattr(hints, hint), bool), (tool.name, hint)
    hints = {t.name: t.annotations for t in out["tools"]}
    assert {"retain", "recall", "list", "show", "correct", "forget", "banks", "stats"} <= set(hints)
    for name in ("recall", "list", "show", "banks", "stats"):
        assert hints[name].read_only_hint is True, name
    assert hints["forget"].destructive_hint is True and hints["forget"].read_only_hint is False
    assert hints["retain"].destructive_hint is False and hints["correct"].destructive_hint is False

    # The whole bank selected: refused, with or without a confirmation; nothing goes.
    for key in ("everything", "everything_confirmed"):
        assert out[key].is_error, text_of(out[key])
        assert "2000" in text_of(out[key]) and "100" in text_of(out[key]), text_of(out[key])
    assert out["count_after_bulk"] == 2000
    # A selector answers with a preview first, and removes nothing.
    preview = out["preview"].structured_content
    assert not out["preview"].is_error, text_of(out["preview"])
    assert preview["dry_run"] is True and preview["count"] == 5
    assert preview["would_forget"] == ids[:5] and len(preview["confirm"]) >= 16
    assert out["count_after_preview"] == 2000
    assert out["wrong_token"].is_error and "confirm" in text_of(out["wrong_token"])
    assert out["other_selection"].is_error, text_of(out["other_selection"])
    # The echoed token removes exactly the facts previewed.
    assert out["confirmed"].structured_content["forgotten"] == ids[:5]
    # Once they are gone the selection holds nothing: nothing to confirm, nothing forgotten.
    assert out["again"].structured_content["forgotten"] == []
    # Facts named by id go at once; more than the bulk limit of them are refused whole.
    assert out["by_ids"].structured_content["forgotten"] == ids[10:12]
    assert out["too_many_ids"].is_error and "201" in text_of(out["too_many_ids"])
    assert out["ids_dry_run"].structured_content["would_forget"] == ids[20:22]
    assert fact_count(db_path) == 2000 - 5 - 2


def test_a_confirmation_covers_only_the_facts_previewed(db_path, embedder, tmp_path):
    """A preview, then a new fact that the selection also takes: the old token no longer
    matches, and nothing goes until the new selection is previewed. The bulk limit is a
    setting."""
    ids = fill_bank(db_path, embedder, [f"Item {i}." for i in range(8)], tags={0: ["x"], 1: ["x"]})

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect(
            "stdio", db_path, MEM_FORGET_LIMIT="3", MEM_CONFIG=str(tmp_path / "none.toml")
        ) as client:
            first = await client.call_tool("forget", {"tags": ["x"]})
            retained = await client.call_tool("retain", {"text": "A new item.", "tags": ["x"]})
            new_id = retained.structured_content["stored"][0]["id"]
            out["stale"] = await client.call_tool(
                "forget", {"tags": ["x"], "confirm": first.structured_content["confirm"]}
            )
            second = await client.call_tool("forget", {"tags": ["x"]})
            out["second"] = second.structured_content
            out["done"] = await client.call_tool(
                "forget", {"tags": ["x"], "confirm": second.structured_content["confirm"]}
            )
            out["new_id"] = new_id
            out["over_limit"] = await client.call_tool("forget", {"before": "2027-01-01"})
            out["stats"] = (await client.call_tool("stats", {})).structured_content
        return out

    out = run(session)
    assert out["stale"].is_error and "confirm" in text_of(out["stale"])
    assert out["second"]["would_forget"] == [ids[0], ids[1], out["new_id"]]
    assert out["done"].structured_content["forgotten"] == [ids[0], ids[1], out["new_id"]]
    assert out["over_limit"].is_error and "3" in text_of(out["over_limit"])
    assert out["stats"]["forget_limit"] == 3
    assert fact_count(db_path) == 6


# -- budget ---------------------------------------------------------------------------------

WORDS = (
    "harbour survey tide crane warehouse ledger pilot buoy dredging quay manifest cargo "
    "schedule inspection mooring berth container customs vessel anchor"
).split()


def long_texts(n: int, words: int = 90) -> list[str]:
    """n distinct long memories that all mention the harbour survey."""
    out = []
    for i in range(n):
        body = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(words))
        out.append(f"Harbour survey note {i}: {body}.")
    return out


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_answers_fit_their_token_budget_as_sent(transport, db_path, embedder):
    """total_tokens said 4096 and the agent received 37,717 tokens; a default list was 9,910;
    a show of a fact that 149 others link to was more than 4,096 tokens alone."""
    ids = fill_bank(db_path, embedder, long_texts(150))
    with Store(db_path) as store, store.atomic():
        store.links.add_links((ids[0], other, "semantic", 0.8) for other in ids[1:])

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect(transport, db_path) as client:
            out["recall"] = await client.call_tool("recall", {"query": "harbour survey"})
            out["recall_small"] = await client.call_tool(
                "recall", {"query": "harbour survey", "max_tokens": 600}
            )
            out["recall_detail"] = await client.call_tool(
                "recall", {"query": "harbour survey", "max_tokens": 1500, "detail": True}
            )
            out["list"] = await client.call_tool("list", {})
            pages, offset = [], 0
            while offset is not None and len(pages) < 200:
                page = await client.call_tool(
                    "list", {"limit": 40, "offset": offset, "max_tokens": 2000}
                )
                pages.append(page)
                offset = page.structured_content["next_offset"]
            out["pages"] = pages
            out["tiny"] = await client.call_tool("recall", {"query": "harbour", "max_tokens": 20})
            out["show_hub"] = await client.call_tool("show", {"ids": [ids[0], ids[1]]})
        return out

    out = run(session)
    for key, budget in (("recall", 4096), ("recall_small", 600), ("recall_detail", 1500)):
        result = out[key]
        assert not result.is_error, text_of(result)
        assert result.structured_content["results"], key
        assert sent_tokens(result) <= budget, (key, sent_tokens(result))
        # Filled, not starved: one more memory like the first would not have fit.
        first = result.structured_content["results"][0]
        one_more = 2 * count_tokens(json.dumps(first, ensure_ascii=False, separators=(",", ":")))
        assert sent_tokens(result) + one_more > budget, (key, sent_tokens(result))
        assert json.loads(result.content[0].text) == result.structured_content
    compact = out["recall"].structured_content["results"][0]
    assert set(compact) <= {"id", "text", "mentioned_at", "score", "context", "tags"}
    assert compact["mentioned_at"].endswith("Z")
    detailed = out["recall_detail"].structured_content["results"][0]
    assert {"scores", "ranks", "entities", "source_id"} <= set(detailed)
    assert out["recall"].structured_content["omitted"] > 0

    assert sent_tokens(out["list"]) <= 4096
    pages = out["pages"]
    for page in pages:
        assert not page.is_error, text_of(page)
        assert sent_tokens(page) <= 2000
    listed = [f["id"] for page in pages for f in page.structured_content["facts"]]
    # Paged by the budget, every fact exactly once, newest said first.
    assert len(listed) == 150 and len(set(listed)) == 150
    assert listed == sorted(listed, reverse=True)
    assert len(pages) > 150 // 40
    assert out["tiny"].is_error and "max_tokens" in text_of(out["tiny"])
    hub = out["show_hub"]
    assert not hub.is_error, text_of(hub)
    assert sent_tokens(hub) <= 4096
    first = hub.structured_content["facts"][0]
    assert len(first["links"]) + first["links_omitted"] == 149


# -- the lifecycle, an empty memory ---------------------------------------------------------


def test_tools_for_the_whole_lifecycle(db_path):
    """retain named possibly_supersedes, but an agent had no correct, show, stats or banks."""

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect("stdio", db_path) as client:
            first = await client.call_tool(
                "retain",
                {"text": "Ben works at Siemens in Munich.", "at": "2026-01-05", "context": "Ben"},
            )
            old_id = first.structured_content["stored"][0]["id"]
            hinted = await client.call_tool(
                "retain",
                {"text": "Ben works at Siemens in Berlin.", "at": "2026-02-05", "context": "Ben"},
            )
            out["hinted"] = hinted.structured_content["stored"][0]
            out["correct"] = await client.call_tool(
                "correct", {"fact_id": old_id, "text": "Ben works at Bosch in Stuttgart."}
            )
            out["superseding"] = await client.call_tool(
                "retain",
                {"text": "Ben moved to Hamburg.", "supersedes": out["hinted"]["id"]},
            )
            for text in ("Trip notes: pack the charger.", "Trip notes: book the taxi."):
                await client.call_tool("retain", {"text": text, "document_id": "trip"})
            out["trip"] = await client.call_tool("list", {"document_id": "trip"})
            out["show"] = await client.call_tool("show", {"ids": [old_id]})
            out["stats"] = await client.call_tool("stats", {})
            out["banks"] = await client.call_tool("banks", {})
            out["recall"] = await client.call_tool("recall", {"query": "Where does Ben work?"})
            out["old_id"] = old_id
        return out

    out = run(session)
    assert out["hinted"]["possibly_supersedes"] == [out["old_id"]]
    corrected = out["correct"].structured_content
    assert corrected["corrected"] == out["old_id"] and corrected["at"].endswith("Z")
    assert not out["superseding"].is_error, text_of(out["superseding"])
    (shown,) = out["show"].structured_content["facts"]
    assert shown["superseded_by"] == corrected["by"][0]
    assert [h["id"] for h in shown["history"]] == [out["old_id"], corrected["by"][0]]
    # Through MCP a document only grows: the second retain did not replace the first.
    trip = sorted(f["text"] for f in out["trip"].structured_content["facts"])
    assert trip == ["Trip notes: book the taxi.", "Trip notes: pack the charger."]
    stats = out["stats"].structured_content
    assert stats["bank"] == "default" and stats["facts"] == 6 and stats["forget_limit"] == 100
    (bank,) = out["banks"].structured_content["banks"]
    assert bank["bank"] == "default" and bank["facts"] == 6
    texts = [r["text"] for r in out["recall"].structured_content["results"]]
    assert "Ben works at Bosch in Stuttgart." in texts
    assert "Ben works at Siemens in Munich." not in texts  # closed by the correction
    assert "Ben works at Siemens in Berlin." not in texts  # closed by supersedes


def test_an_empty_memory_answers_and_creates_nothing(tmp_path):
    db = tmp_path / "sub" / "mem.db"

    async def session() -> list[Any]:
        async with connect("stdio", db) as client:
            return [
                await client.call_tool("recall", {"query": "anything"}),
                await client.call_tool("list", {}),
                await client.call_tool("stats", {}),
                await client.call_tool("banks", {}),
                await client.call_tool("show", {"ids": [1]}),
                await client.call_tool("forget", {"tags": ["x"]}),
            ]

    recalled, listed, stats, banks, shown, forgot = run(session)
    assert recalled.structured_content["results"] == []
    assert listed.structured_content == {"facts": [], "next_offset": None}
    assert stats.structured_content["facts"] == 0 and stats.structured_content["banks"] == {}
    assert banks.structured_content == {"banks": []}
    for result in (shown, forgot):  # nothing to show or forget: an error that says so
        assert result.is_error and "no mem store" in text_of(result), text_of(result)
        assert str(tmp_path) not in text_of(result)  # the path is not the agent's business
    assert not db.parent.exists()


# -- concurrency ----------------------------------------------------------------------------


def test_a_long_retain_blocks_no_recall_and_a_cancelled_one_writes_nothing(db_path):
    """Calls ran one at a time, each to its end: a 5 MB retain held every recall for 335 s,
    and cancelling it did not stop it. Now a recall answers while the retain embeds, and the
    cancelled retain stops before its write: the next retain (which waits for it) is the
    only thing stored."""
    long_text = " ".join(
        f"Entry {i} of the ledger records a delivery of {i % 97} crates to dock {i % 13}."
        for i in range(5000)
    )

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect("stdio", db_path) as client:
            await client.call_tool("retain", {"text": "The harbour opens at six."})
            started = anyio.current_time()
            async with anyio.create_task_group() as tasks:

                async def long_retain() -> None:
                    with anyio.move_on_after(600) as scope:
                        out["long"] = await client.call_tool("retain", {"text": long_text})
                    out["long_cancelled"] = scope.cancelled_caught

                tasks.start_soon(long_retain)
                await anyio.sleep(1.0)
                before = anyio.current_time()
                out["recall"] = await client.call_tool("recall", {"query": "harbour opens"})
                out["recall_seconds"] = anyio.current_time() - before
                tasks.cancel_scope.cancel()  # the client gives up on the long retain
            out["cancelled_after"] = anyio.current_time() - started
            after = await client.call_tool("retain", {"text": "The harbour closes at ten."})
            out["after"] = after
            out["list"] = await client.call_tool("list", {"limit": 100})
        return out

    out = run(session)
    assert "long" not in out, "the long retain finished before it was cancelled: make it longer"
    assert not out["recall"].is_error, text_of(out["recall"])
    assert out["recall"].structured_content["results"][0]["text"] == "The harbour opens at six."
    assert out["recall_seconds"] < 30, out["recall_seconds"]
    assert not out["after"].is_error, text_of(out["after"])
    texts = sorted(f["text"] for f in out["list"].structured_content["facts"])
    assert texts == ["The harbour closes at ten.", "The harbour opens at six."]
    with Store(db_path) as store:
        assert store.facts.fact_count() == 2


def test_recalls_run_in_parallel_with_a_write(db_path, embedder):
    """Many recalls at once from one client, beside a retain: every answer is right."""
    fill_bank(db_path, embedder, long_texts(40, words=20))

    async def session() -> list[Any]:
        async with connect("stdio", db_path) as client:
            calls = [
                client.call_tool("recall", {"query": f"harbour survey note {i}", "max_tokens": 500})
                for i in range(8)
            ]
            calls.append(client.call_tool("retain", {"text": "A survey boat was repaired."}))
            return await asyncio.gather(*calls)

    *recalls, retained = run(session)
    assert not retained.is_error, text_of(retained)
    for result in recalls:
        assert not result.is_error, text_of(result)
        assert result.structured_content["results"]
    assert fact_count(db_path) == 41
