"""`mem mcp`: mem's memory as a Model Context Protocol server over stdio (or HTTP).

Built on the official `mcp` SDK (2.x, whose FastMCP is now `MCPServer`): each tool is a typed
Python function, so the SDK derives its JSON schema and validates arguments before our code
runs; a bad argument or a failed call comes back as a tool error and the server keeps serving.

One server process holds one Memory: it loads the embedder (and the reranker, when one is
configured) once, on first use, so an agent's tenth recall costs what the CLI's warm path
costs, not a model load; reads run in parallel on read-only connections, writes one at a
time (memcli/memory.py, memcli/readpool.py). Tools answer with compact JSON that fits the
token budget as sent (memcli/agentjson.py), the fields of the CLI's JSON (`detail` gives all
of them). Each tool carries MCP's hints (read-only, destructive, idempotent, closed world);
`forget` by selector previews first and needs the preview's token (Memory.forget_guarded).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from memcli import __version__, enums
from memcli.cliparams import INT64_MAX

INSTRUCTIONS = (
    "mem is a long-term memory. Call `recall` with a question before answering anything that "
    "may depend on what the user said earlier; call `retain` to remember something worth "
    "keeping (a decision, a preference, a plan, with `at` when it was said). Each memory has "
    "`mentioned_at` (when it was said) and `occurred_start`/`occurred_end` (the time it talks "
    "about): a plan said in February about November is not something that already happened. "
    "When `retain` names `possibly_supersedes` and the new fact replaces an old one, call "
    "`correct` (the old one is kept for history). `forget` with a selector answers with a "
    "preview first; it removes nothing until called again with the preview's `confirm`."
)


def _selection(memory: Any, fields: dict[str, Any]) -> Any:
    """A selection from tool arguments (None and empty lists: not given)."""
    return memory.selection(**{k: v for k, v in fields.items() if v is not None and v != []})


# The values of mem's enums (memcli/enums.py) as the tools' schemas list them (a Literal:
# the tools validate strictly, and strict pydantic takes an Enum only as an instance).
Budget = Literal[enums.Budget.values()]  # type: ignore[valid-type]
TagsMatch = Literal[enums.TagsMatch.values()]  # type: ignore[valid-type]
FactType = Literal[enums.FactType.values()]  # type: ignore[valid-type]


Bank = Annotated[str | None, Field(description="Memory bank (default: the server's).")]
MaxTokens = Annotated[
    int | None,
    Field(
        description="Token budget of the whole answer as sent (default: the server's "
        "max_tokens setting, else 4096).",
        gt=0,
        le=INT64_MAX,
    ),
]
Detail = Annotated[
    bool,
    Field(description="Every field (as `mem ... --format json`), not only the essential ones."),
]


def one_line_validation(exc: Any) -> str:
    """A pydantic ValidationError of a tool's arguments in one line, each problem named by
    its argument ("max_tokens: Input should be greater than 0"); the SDK's text was four
    lines a problem, with a link to pydantic's documentation."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def _server_class() -> Any:
    """MCPServer, with argument errors in one line (the README promises one-line errors)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    class OneLineErrorsServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None):
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError):
                    text = one_line_validation(exc.__cause__)
                    raise ToolError(f"Error executing tool {name}: {text}") from exc.__cause__
                raise

    return OneLineErrorsServer


# Every tool's hints for the client (MCP ToolAnnotations): mem's world is closed (its store).
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}
ADDITIVE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False}
DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}


def _annotations(title: str, hints: dict[str, bool]) -> Any:
    from mcp_types import ToolAnnotations

    return ToolAnnotations(
        title=title,
        read_only_hint=hints["readOnlyHint"],
        destructive_hint=hints["destructiveHint"],
        idempotent_hint=hints["idempotentHint"],
        open_world_hint=False,
    )


# The links `show` lists of a fact (the strongest; the rest are counted), and how much of each
# linked fact's text: a fact that 50 near-copies link to was more than 4,096 tokens alone.
SHOWN_LINKS = 10
LINKED_TEXT_CHARS = 120


def _with_links(fact: dict[str, Any], shown: int) -> dict[str, Any]:
    """A fact of `show` with its `shown` strongest links, their texts cut; links_omitted
    counts the others."""
    links = sorted(fact["links"], key=lambda link: -link["weight"])
    kept = []
    for link in links[:shown]:
        text = link.get("other_text") or ""
        if len(text) > LINKED_TEXT_CHARS:
            text = text[: LINKED_TEXT_CHARS - 1].rstrip() + "…"
        kept.append({**link, "other_text": text})
    out = {**fact, "links": kept}
    if len(links) > len(kept):
        out["links_omitted"] = len(links) - len(kept)
    return out


def _answer(obj: dict[str, Any]) -> Any:
    """A tool's result: one line of compact JSON as text, and the same object as
    structuredContent (memcli/agentjson.py counts both against the budget)."""
    from mcp_types import CallToolResult, TextContent

    from memcli.agentjson import dumps

    return CallToolResult(
        content=[TextContent(type="text", text=dumps(obj))], structured_content=obj
    )


def build_server(memory: Any) -> Any:
    """The MCP server with mem's tools bound to one Memory (its store and models, loaded
    once for every call; reads run in parallel, writes one at a time: memcli/memory.py)."""
    import threading

    import anyio
    from mcp.server.mcpserver.exceptions import ToolError

    from memcli import agentjson
    from memcli.agentjson import compact, fit

    # INFO logs every call on stderr; an agent's host shows stderr to its user.
    server = _server_class()(
        "mem", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    def private(message: str) -> str:
        """An error as an agent may see it: the store's path on this machine is not the
        agent's business (it may be shown to, or logged by, a third party)."""
        for shown in {str(memory.db.resolve()), str(memory.db), memory.shown_db}:
            message = message.replace(f"at {shown}", "yet").replace(shown, "the store")
        return message

    async def call(work: Any) -> Any:
        """work(cancelled) on a worker thread: a read beside the others, a write in its turn
        (memcli/memory.py). A call the client cancels is answered no more, and its
        `cancelled()` turns true: the Memory stops before its next write (a transaction
        under way commits). The Memory's one-line errors (bad date, unknown bank, locked
        store...) come back as tool errors, each naming the tool's argument it is about."""
        from memcli.cliutil import describe_unexpected
        from memcli.errors import MemError

        stop = threading.Event()
        try:
            return await anyio.to_thread.run_sync(lambda: work(stop.is_set), abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            stop.set()
            raise
        except (MemError, agentjson.BudgetTooSmall) as exc:
            text = exc.describe() if isinstance(exc, MemError) else str(exc)
            raise ToolError(private(text)) from None
        except Exception as exc:  # noqa: BLE001 - a tool error, never a dead server
            raise ToolError(private(describe_unexpected(exc))) from None

    def budget_of(max_tokens: int | None) -> int:
        return memory.max_tokens if max_tokens is None else max_tokens

    @server.tool(
        name="retain",
        description="Remember a piece of text (a note, a decision, a dialog turn). It is split "
        "into facts with their entities and dates, linked and embedded; a chat log of "
        "'Name: ...' lines (two or more people, two lines each) is stored one turn a fact, "
        "each its speaker's; give `context` for a single turn. Returns the facts "
        "stored, each with its id; `possibly_supersedes` names older facts of the same speaker "
        "that a new one nearly repeats (it may correct them: then call `correct`, or retain "
        "with `supersedes`). Nothing is ever replaced or deleted by retain.",
        annotations=_annotations("Remember", ADDITIVE),
    )
    async def retain(
        text: Annotated[str, Field(description="What to remember.", min_length=1)],
        at: Annotated[
            str | None,
            Field(description="When it was said: ISO date/time or e.g. 'yesterday 5pm'."),
        ] = None,
        context: Annotated[
            str | None, Field(description="Who said it or where it comes from.")
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Tags to file it under.")] = None,
        type: Annotated[FactType | None, Field(description="Fact type (default: guessed).")] = None,
        document_id: Annotated[
            str | None, Field(description="Document id: the facts are added to that document.")
        ] = None,
        supersedes: Annotated[
            int | None,
            Field(
                description="This text corrects that fact id: the old fact is closed (kept for "
                "as_of), this one is current.",
                ge=1,
                le=INT64_MAX,
            ),
        ] = None,
        bank: Bank = None,
    ) -> CallToolResult:
        def work(cancelled: Any) -> dict[str, Any]:
            done = memory.retain(
                text,
                at=at,
                context=context,
                tags=tags,
                type=type,
                document_id=document_id,
                supersedes=supersedes,
                # Through MCP a document only grows: replacing one removed its facts, and
                # an agent's retain must never delete (forget does, with a preview).
                append=document_id is not None,
                bank=bank,
                cancelled=cancelled,
            )
            summary = done.summary
            head = {"summary": {"facts": summary.facts, "duplicates": summary.duplicates}}
            stored = [compact(s.to_json()) for s in done.stored]
            answer, _ = fit(
                head,
                "stored",
                stored,
                memory.max_tokens,
                skip=False,
                finish=lambda a, omitted: a.update(omitted=omitted) if omitted else None,
                required=False,  # it is stored: the answer says so, whatever the budget
            )
            return answer

        return _answer(await call(work))

    @server.tool(
        name="recall",
        description="Recall the memories that best answer a query, best first. The whole answer "
        "fits max_tokens as sent. Each memory: id, text, context (the speaker), mentioned_at "
        "(when it was said) and occurred_start/occurred_end (the time it talks about: a plan "
        "said in February about November has not happened yet), score. `omitted`: memories "
        "that matched but did not fit. `nothing_relevant`: true when no memory is close "
        "enough to the query to be about it (then say you do not know).",
        annotations=_annotations("Recall", READ_ONLY),
    )
    async def recall(
        query: Annotated[str, Field(description="A question or keywords.", min_length=1)],
        budget: Annotated[
            Budget | None,
            Field(
                description="Candidates per arm: low 100, mid 300, high 1000 (default: the "
                "server's budget setting, else mid)."
            ),
        ] = None,
        max_tokens: MaxTokens = None,
        limit: Annotated[
            int | None, Field(description="At most this many memories.", gt=0, le=INT64_MAX)
        ] = None,
        tags: Annotated[
            list[str] | None,
            Field(
                description="Scope by tags: with tags_match any (the default) memories with "
                "any of them and untagged ones pass; any_strict: tagged ones only."
            ),
        ] = None,
        tags_match: Annotated[
            TagsMatch,
            Field(
                description="any | all (untagged pass too), any_strict | all_strict (tagged "
                "only), exact (just these tags)."
            ),
        ] = "any",
        types: Annotated[list[FactType] | None, Field(description="Only these types.")] = None,
        now: Annotated[
            str | None,
            Field(description="Reference time for recency and relative dates in the query."),
        ] = None,
        as_of: Annotated[
            str | None,
            Field(description="Answer as the memory stood at this time (ISO date)."),
        ] = None,
        detail: Detail = False,
        bank: Bank = None,
    ) -> CallToolResult:
        def work(cancelled: Any) -> dict[str, Any]:
            tokens = budget_of(max_tokens)
            result = memory.recall(
                query,
                budget=budget,
                max_tokens=tokens,
                limit=limit,
                types=types,
                tags=tags,
                tags_match=tags_match,
                now=now,
                as_of=as_of,
                bank=bank,
            )
            full = result.to_json()
            if detail:
                head = {k: v for k, v in full.items() if k != "results"}
                items = full["results"]
            else:
                head = {"now": full["now"]}
                items = [compact(r) for r in full["results"]]
            floor = full.get("floor")
            if floor is not None and not floor["passed"]:
                # Nothing reached the relevance floor (recall/floor.py): say so, so the
                # agent answers "I don't know" instead of reading an empty list as an error.
                head["nothing_relevant"] = True
            kept_tokens = {r["id"]: r.get("tokens") or 0 for r in full["results"]}

            def finish(answer: dict[str, Any], omitted: int) -> None:
                if detail:  # the memories' own count, as the CLI's JSON gives it
                    answer["total_tokens"] = sum(kept_tokens[r["id"]] for r in answer["results"])
                answer["omitted"] = omitted

            answer, _ = fit(head, "results", items, tokens, finish=finish)
            return answer

        return _answer(await call(work))

    @server.tool(
        name="list",
        description="List stored memories, newest said first, optionally filtered, a page at "
        "a time: {facts, next_offset}. The page fits max_tokens as sent; call again with "
        "offset = next_offset for the next one (null: no more). Use it to find fact ids.",
        annotations=_annotations("List memories", READ_ONLY),
    )
    async def list_memories(
        tags: Annotated[list[str] | None, Field(description="Only facts with these tags.")] = None,
        tags_match: Annotated[TagsMatch, Field(description="How tags filter.")] = "any_strict",
        types: Annotated[list[FactType] | None, Field(description="Only these types.")] = None,
        context: Annotated[str | None, Field(description="Only this speaker / source.")] = None,
        document_id: Annotated[str | None, Field(description="Only this document.")] = None,
        source_id: Annotated[str | None, Field(description="Only this input id.")] = None,
        since: Annotated[str | None, Field(description="Said at or after this time.")] = None,
        until: Annotated[str | None, Field(description="Said before this time.")] = None,
        include_invalid: Annotated[
            bool, Field(description="Also facts a correction has closed.")
        ] = False,
        as_of: Annotated[str | None, Field(description="As the store stood then.")] = None,
        limit: Annotated[int, Field(description="At most this many.", gt=0, le=1000)] = 20,
        offset: Annotated[int, Field(description="Skip this many first.", ge=0, le=INT64_MAX)] = 0,
        max_tokens: MaxTokens = None,
        detail: Detail = False,
        bank: Bank = None,
    ) -> CallToolResult:
        def work(cancelled: Any) -> dict[str, Any]:
            selection = _selection(
                memory,
                {
                    "tags": tags,
                    "tags_match": tags_match,
                    "types": types,
                    "context": context,
                    "document_id": document_id,
                    "source_id": source_id,
                    "since": since,
                    "until": until,
                    "include_invalid": include_invalid,
                    "as_of": as_of,
                },
            )
            # One more than the page: whether there is a next one.
            facts = memory.list(selection, limit=limit + 1, offset=offset, bank=bank)
            page = [f.to_json() if detail else compact(f.to_json()) for f in facts[:limit]]

            def finish(answer: dict[str, Any], omitted: int) -> None:
                shown = len(answer["facts"])
                more = omitted > 0 or len(facts) > limit
                answer["next_offset"] = offset + shown if more else None

            # An object, not the bare array: the SDK gave an array one content block per
            # item, and none at all when it was empty.
            answer, _ = fit({}, "facts", page, budget_of(max_tokens), skip=False, finish=finish)
            return answer

        return _answer(await call(work))

    @server.tool(
        name="show",
        description="Show facts whole by id: times, validity, entities, its strongest links "
        "(`links_omitted` counts the rest), and the correction history (which fact replaced "
        "which). Fits max_tokens as sent; `omitted_ids`: facts that did not fit.",
        annotations=_annotations("Show facts", READ_ONLY),
    )
    async def show(
        ids: Annotated[
            list[Annotated[int, Field(ge=1, le=INT64_MAX)]],
            Field(description="Fact ids.", min_length=1, max_length=100),
        ],
        max_tokens: MaxTokens = None,
        bank: Bank = None,
    ) -> CallToolResult:
        def work(cancelled: Any) -> dict[str, Any]:
            details = [d.to_json() for d in memory.show(ids, bank=bank)]
            tokens = budget_of(max_tokens)

            def finish(answer: dict[str, Any], omitted: int) -> None:
                if omitted:
                    answer["omitted_ids"] = [d["id"] for d in details[len(details) - omitted :]]

            try:
                shown = [_with_links(d, SHOWN_LINKS) for d in details]
                answer, _ = fit({}, "facts", shown, tokens, skip=False, finish=finish)
            except agentjson.BudgetTooSmall:  # a fact linked to many: without its links
                shown = [_with_links(d, 0) for d in details]
                answer, _ = fit({}, "facts", shown, tokens, skip=False, finish=finish)
            return answer

        return _answer(await call(work))

    @server.tool(
        name="correct",
        description="Correct a fact: store the new text as its current version and close the "
        "old one (kept: recall with as_of before now still finds it; `show` gives the "
        "history). Use it on the ids `possibly_supersedes` names when the new fact replaces "
        "the old.",
        annotations=_annotations("Correct a fact", ADDITIVE),
    )
    async def correct(
        fact_id: Annotated[int, Field(description="The fact to correct.", ge=1, le=INT64_MAX)],
        text: Annotated[str, Field(description="What is true now.", min_length=1)],
        at: Annotated[
            str | None,
            Field(description="When the correction was made (default now; not in the future)."),
        ] = None,
        context: Annotated[
            str | None, Field(description="Speaker (default: the old fact's).")
        ] = None,
        bank: Bank = None,
    ) -> CallToolResult:
        def work(cancelled: Any) -> dict[str, Any]:
            return memory.correct(
                fact_id, text, at=at, context=context, bank=bank, cancelled=cancelled
            ).to_json()

        return _answer(await call(work))

    @server.tool(
        name="forget",
        description="Forget memories for good (every table, one transaction). Facts named by "
        "`ids` go at once. Any other selector (a document, source id, tags, speaker, time "
        "range, query) first returns a preview and removes nothing: `count`, `would_forget` "
        "and `confirm`; call forget again with the same selector and `confirm` set to that "
        "token to remove exactly those facts. At most the server's forget_limit facts (100 "
        "unless configured) go in one call; a larger selection is refused.",
        annotations=_annotations("Forget", DESTRUCTIVE),
    )
    async def forget(
        ids: Annotated[
            list[Annotated[int, Field(ge=1, le=INT64_MAX)]] | None, Field(description="Fact ids.")
        ] = None,
        document_id: Annotated[str | None, Field(description="Every fact of it.")] = None,
        source_id: Annotated[str | None, Field(description="Facts of this input id.")] = None,
        tags: Annotated[list[str] | None, Field(description="Facts with these tags.")] = None,
        types: Annotated[list[FactType] | None, Field(description="Facts of these types.")] = None,
        context: Annotated[str | None, Field(description="Facts of this speaker.")] = None,
        since: Annotated[str | None, Field(description="Said at or after this time.")] = None,
        before: Annotated[str | None, Field(description="Said before this time.")] = None,
        query: Annotated[
            str | None,
            Field(
                description="The facts recall ranks best for it that match it (hold one of "
                "its words, or are as close to it as linked facts)."
            ),
        ] = None,
        limit: Annotated[
            int, Field(description="With query: at most this many.", gt=0, le=INT64_MAX)
        ] = 10,
        confirm: Annotated[
            str | None,
            Field(description="The token of this selector's preview: remove what it showed."),
        ] = None,
        dry_run: Annotated[bool, Field(description="Change nothing; say what would go.")] = False,
        bank: Bank = None,
    ) -> CallToolResult:
        def work(cancelled: Any) -> dict[str, Any]:
            selection = _selection(
                memory,
                {
                    "ids": ids,
                    "document_id": document_id,
                    "source_id": source_id,
                    "tags": tags,
                    # Only facts carrying the tags: the non-strict modes also match
                    # untagged ones.
                    "tags_match": "any_strict",
                    "types": types,
                    "context": context,
                    "since": since,
                    "until": before,
                    "query": query,
                    "query_limit": limit,
                    "include_invalid": True,
                },
            )
            done = memory.forget_guarded(
                selection, confirm=confirm, dry_run=dry_run, bank=bank, cancelled=cancelled
            )
            full = done.to_json()
            if not done.dry_run:
                return full
            head = {k: v for k, v in full.items() if k != "facts"}
            preview = [compact(f) for f in full["facts"]]
            answer, _ = fit(head, "facts", preview, memory.max_tokens, skip=False, required=False)
            return answer

        return _answer(await call(work))

    @server.tool(
        name="banks",
        description="The memory banks in the store: facts, documents, entities and links of "
        "each, its first and last memory, its embedder.",
        annotations=_annotations("Banks", READ_ONLY),
    )
    async def banks() -> CallToolResult:
        def work(cancelled: Any) -> dict[str, Any]:
            return {"banks": [b.to_json() for b in memory.banks()]}

        return _answer(await call(work))

    @server.tool(
        name="stats",
        description="This server's memory at a glance: its default bank, how many facts each "
        "bank holds, and the limits it applies (max_tokens, forget_limit).",
        annotations=_annotations("Stats", READ_ONLY),
    )
    async def stats() -> CallToolResult:
        def work(cancelled: Any) -> dict[str, Any]:
            info = memory.stats()
            return {
                "bank": memory.bank,
                "banks": {row["bank"]: row["facts"] for row in info.banks},
                "facts": sum(row["facts"] for row in info.banks),
                "embedder": info.embedder,
                "max_tokens": memory.max_tokens,
                "forget_limit": memory.forget_limit,
            }

        return _answer(await call(work))

    _strict_arguments(server)
    return server


def _strict_arguments(server: Any) -> None:
    """Each tool refuses an argument it does not have and a value of another JSON type than
    its schema's: by default the SDK dropped unknown ones ("timestamp" for "at": stored as
    said now, no error) and coerced the rest (max_tokens true ran as 1, dry_run "yes" as
    true). The schemas say so too (additionalProperties false)."""
    from pydantic import ConfigDict, model_validator

    for tool in server._tool_manager.list_tools():
        lax = tool.fn_metadata.arg_model
        config = ConfigDict(**lax.model_config, extra="forbid", strict=True)
        whole = {n for n, f in lax.model_fields.items() if _takes_int(f.annotation)}

        def integral_floats(cls: Any, data: Any, whole: set[str] = whole) -> Any:
            # JSON Schema's integer is any number without a fraction: 200.0 is 200.
            if not isinstance(data, dict):
                return data
            return {
                k: int(v) if k in whole and isinstance(v, float) and v.is_integer() else v
                for k, v in data.items()
            }

        namespace = {
            "model_config": config,
            "integral_floats": model_validator(mode="before")(classmethod(integral_floats)),
        }
        tool.fn_metadata.arg_model = type(lax.__name__, (lax,), namespace)
        tool.parameters = {**tool.parameters, "additionalProperties": False}


def _takes_int(annotation: Any) -> bool:
    """Whether a tool argument's type is int (or int | None)."""
    import typing

    return annotation is int or int in typing.get_args(annotation)


def serve(memory: Any) -> None:
    """Serve MCP on stdin/stdout until the client closes the pipe."""
    import anyio

    try:
        anyio.run(_serve_stdio, build_server(memory))
    finally:
        memory.close()


async def _serve_stdio(server: Any) -> None:
    """What `MCPServer.run("stdio")` does, but every line a client could be waiting on gets
    an answer. The SDK's stdio reader hands a line that is not a JSON-RPC message on as an
    exception, which its session only logs, and reads a request whose id is no MCP id (null,
    a fraction, true, an object) as a notification, which gets no answer: either way a
    client would wait forever. Such lines get a JSON-RPC error (id null: JSON-RPC 2.0,
    section 5.1) instead."""
    try:
        await _serve_lines(server)
    except Exception as exc:  # noqa: BLE001 - a client gone mid-answer, else raised again
        if not _reader_gone(exc):
            raise


def _reader_gone(exc: BaseException) -> bool:
    """Whether exc (or every exception of its group) is the client's end of stdout closed:
    the end of the session as a reader that went away, not an error."""
    import anyio

    inner = getattr(exc, "exceptions", None)
    if inner is not None:
        return bool(inner) and all(_reader_gone(e) for e in inner)
    return isinstance(
        exc,
        (
            BrokenPipeError,
            ConnectionResetError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ),
    )


# How long the server waits at its end for the errors of refused lines to be written.
REFUSALS_GRACE_SECONDS = 2.0


async def _serve_lines(server: Any) -> None:
    """_serve_stdio's loop over stdin's lines (see there)."""
    import anyio
    import mcp_types as types
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async serves this one
    # Errors for the requests screened out of stdin, unbounded: the reader never waits on
    # the writer.
    refused, refusals = anyio.create_memory_object_stream[SessionMessage](float("inf"))
    # Ids of the requests handed to the SDK and not yet answered: at the end of input the
    # SDK stops, and a call still running got no answer (its write committed all the same).
    unanswered: Counter = Counter()

    with _claimed_stdin() as lines:
        async with stdio_server(stdin=_screened(lines, refused)) as (wire_in, wire_out):
            send, receive = anyio.create_memory_object_stream[SessionMessage](0)
            replies, sent = anyio.create_memory_object_stream[SessionMessage](0)

            async def screen() -> None:
                async with send:
                    async for item in wire_in:
                        if isinstance(item, Exception):
                            error = _wire_error(item)
                            if error is not None:
                                await wire_out.send(SessionMessage(error))
                        else:
                            message = item.message
                            if isinstance(message, types.JSONRPCRequest):
                                unanswered[message.id] += 1
                            elif (
                                isinstance(message, types.JSONRPCNotification)
                                and message.method == "notifications/cancelled"
                            ):
                                # A cancelled request gets no answer (MCP's cancellation).
                                params = message.params
                                cancelled = (
                                    params.get("requestId") if isinstance(params, dict) else None
                                )
                                if isinstance(cancelled, (int, str)):
                                    unanswered.pop(cancelled, None)
                            await send.send(item)
                    while +unanswered:  # end of input: the calls in flight answer first
                        await anyio.sleep(0.01)

            async def relay_replies() -> None:
                async with sent:
                    async for reply in sent:
                        await wire_out.send(reply)
                        if isinstance(reply.message, (types.JSONRPCResponse, types.JSONRPCError)):
                            unanswered[reply.message.id] -= 1

            refusals_answered = anyio.Event()

            async def answer_refusals() -> None:
                try:
                    async with refusals:
                        async for error in refusals:
                            await wire_out.send(error)
                finally:
                    refusals_answered.set()

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(screen)
                tasks.start_soon(answer_refusals)
                async with anyio.create_task_group() as serving:
                    # The relay ends when the SDK closes its end, its last reply written.
                    serving.start_soon(relay_replies)
                    await lowlevel.run(receive, replies, lowlevel.create_initialization_options())
                # At end of input the refusals end too, once written: the last line's was
                # sometimes cancelled unwritten. (A client gone early: not waited for long.)
                with anyio.move_on_after(REFUSALS_GRACE_SECONDS):
                    await refusals_answered.wait()
                tasks.cancel_scope.cancel()
            await wire_out.aclose()  # the SDK closed the stream it was given, not this one


@contextmanager
def _claimed_stdin() -> Iterator[Any]:
    """stdin's lines (an async file), read from a copy of file descriptor 0 while 0 itself
    points at the null device, as the SDK's stdio_server does for the stdin it opens: a
    tool's code or a child process then reads end-of-file, never a client's message. The
    copy is not closed: a worker thread may still be blocked reading it at exit."""
    import io

    import anyio

    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        raw = os.fdopen(wire, "rb", closefd=False)
        # Bytes that are not UTF-8 come through as surrogate escapes, for _refusal to turn
        # down (decoded as U+FFFD, they were stored as such).
        yield anyio.wrap_file(io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape"))
    finally:
        os.dup2(wire, 0)


async def _screened(lines: Any, refused: Any) -> AsyncIterator[str]:
    """The lines for the SDK's reader, less the requests whose id is no MCP id (a string or
    an integer): for each of those an Invalid Request error goes to `refused`."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    async with refused:
        async for line in lines:
            refusal = _refusal(line)
            if refusal is not None:
                request_id, code, message = refusal
                error = types.JSONRPCError(
                    jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
                )
                await refused.send(SessionMessage(error))
                continue
            yield line


def _refusal(line: str) -> tuple[str | int | None, int, str] | None:
    """(id, code, message) of the error for a request line the SDK would not answer: an id
    that is neither a string nor an integer (read as a notification: no answer), or text
    with a lone surrogate escape ("\\ud800", half an emoji a client cut), which is JSON but
    no text (answered as a parse error without the id the client waits on). None for any
    other line."""
    import mcp_types as types

    not_utf8 = not _is_text(line)  # bytes that are not UTF-8 (surrogate escapes, see above)
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        if not_utf8:
            return None, types.PARSE_ERROR, "Parse error: the line is not valid UTF-8"
        return None  # the SDK's reader answers with a parse error
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return (
            (None, types.PARSE_ERROR, "Parse error: the line is not valid UTF-8")
            if (not_utf8)
            else None
        )
    request_id = message["id"]
    # bool is an int to Python, but no JSON-RPC id.
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        return None, types.INVALID_REQUEST, "Invalid request: the id must be a string or an integer"
    if isinstance(request_id, str) and not _is_text(request_id):
        # An id that cannot be written back: the reply that echoed it failed, and took the
        # connection down with it.
        return None, types.INVALID_REQUEST, "Invalid request: the id is not valid text"
    if not_utf8:
        return request_id, types.INVALID_PARAMS, "Invalid params: the request is not valid UTF-8"
    if not _is_text(json.dumps(message, ensure_ascii=False)):
        return (
            request_id,
            types.INVALID_PARAMS,
            "Invalid params: a lone surrogate escape (half of a character) is no text",
        )
    return None


def _is_text(value: str) -> bool:
    """Whether value can be written as UTF-8 (no lone surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _wire_error(exc: Exception) -> Any:
    """The JSON-RPC error for a line the SDK could not read as a message: a parse error when
    it is not JSON text (a lone surrogate escape included), else an invalid request, with
    the line's id when it has one a client could be waiting on (else null). A blank line
    gets no answer (None): it is no message, only spacing."""
    import mcp_types as types

    errors = getattr(exc, "errors", None)
    details = errors() if callable(errors) else []
    inputs = [d.get("input") for d in details]
    if any(d.get("type") == "json_invalid" for d in details):
        if all(isinstance(i, str) and not i.strip() for i in inputs):
            return None
        code, message, request_id = types.PARSE_ERROR, "Parse error: the line is not JSON", None
    else:
        code, message = types.INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message"
        ids = [i.get("id") for i in inputs if isinstance(i, dict)]
        # bool is an int to Python, but no JSON-RPC id.
        request_id = next(
            (i for i in ids if isinstance(i, (int, str)) and not isinstance(i, bool)), None
        )
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )


# -- streamable HTTP ------------------------------------------------------------------------

MCP_PATH = "/mcp"
HEALTH_PATH = "/health"


class HttpError(ValueError):
    """A `--http` address or token that cannot be served (one line)."""


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT ("127.0.0.1:8765", "[::1]:8765", "localhost:0") as (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise HttpError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:8765)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether host names this machine only (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bearer_token(env_value: str | None, token_file: str | None) -> str | None:
    """The token clients must send ($MEM_MCP_TOKEN, else the config's mcp_token_file)."""
    if env_value:
        token = env_value.strip()
        where = "$MEM_MCP_TOKEN"
    elif token_file:
        where = f"mcp_token_file {token_file}"
        try:
            with open(token_file, encoding="utf-8") as fh:
                token = fh.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise HttpError(f"cannot read the {where}: {getattr(exc, 'strerror', exc)}") from None
    else:
        return None
    if not token or any(ch.isspace() for ch in token) or not token.isprintable():
        raise HttpError(f"the {where} holds no usable token (one word of printable characters)")
    if len(token) < 16:
        raise HttpError(
            f"the token of {where} is too short to guess-proof: use 16 characters or more"
        )
    return token


def http_app(server: Any, token: str | None, host: str) -> Any:
    """The server as an ASGI app: MCP's streamable HTTP at /mcp, a health check at /health,
    and, with a token, `Authorization: Bearer TOKEN` checked on every request (the health
    check's too) before anything else runs."""
    import hmac

    from starlette.responses import JSONResponse

    @server.custom_route(HEALTH_PATH, methods=["GET"])
    async def health(request: Any) -> Any:
        return JSONResponse({"status": "ok", "server": "mem", "version": __version__})

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    if token is None:
        return app
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                refusal = JSONResponse(
                    {"error": "unauthorized: send Authorization: Bearer <the server's token>"},
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer realm="mem"'},
                )
                await refusal(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


def serve_http(memory: Any, address: str, token: str | None, announce: Any = None) -> None:
    """Serve MCP over streamable HTTP at http://HOST:PORT/mcp until stopped (SIGINT or
    SIGTERM): one Memory, so one store and one set of models, for every client. A token is
    required for any address but loopback. `announce(url)` is told where it listens once
    the socket is bound (port 0: the one the system chose)."""
    import socket

    import anyio
    import uvicorn

    host, port = parse_address(address)
    if token is None and not is_loopback(host):
        raise HttpError(
            f"refusing to serve {host} without a token: anyone who can reach it could read "
            "and forget the memory; set MEM_MCP_TOKEN or mcp_token_file (`mem config set "
            "mcp_token_file PATH`), or bind 127.0.0.1"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise HttpError(f"cannot listen on {address}: {exc.strerror or exc}") from None
    bound_port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    app = http_app(build_server(memory), token, host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    web = uvicorn.Server(config)
    if announce is not None:
        announce(f"http://{shown_host}:{bound_port}{MCP_PATH}")
    try:
        anyio.run(web.serve, [sock])
    finally:
        sock.close()
        memory.close()
