"""`mem mcp`: mem's memory as a Model Context Protocol server over stdio.

Built on the official `mcp` SDK (2.x, whose FastMCP is now `MCPServer`): each tool is a typed
Python function, so the SDK derives its JSON schema and validates arguments before our code
runs; a bad argument or a failed call comes back as a tool error and the server keeps serving.

One server process keeps one store connection and loads the embedder (and the reranker, when
one is configured) once, on first use: an agent's tenth recall costs what the CLI's warm path
costs, not a model load. Tools answer with the same JSON as the CLI (`mem recall --format
json`, `mem retain --json`), built by the same functions in memcli/render.py.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from pydantic import Field

from memcli import __version__, enums
from memcli.cliparams import INT64_MAX

INSTRUCTIONS = (
    "mem is a long-term memory. Call `recall` with a question before answering anything that "
    "may depend on what the user said earlier; call `retain` to remember something worth "
    "keeping (a decision, a preference, a plan, with `at` when it was said). Each memory has "
    "`mentioned_at` (when it was said) and `occurred_start`/`occurred_end` (the time it talks "
    "about): a plan said in February about November is not something that already happened."
)


def _selection(memory: Any, fields: dict[str, Any]) -> Any:
    """A selection from tool arguments (None and empty lists: not given)."""
    return memory.selection(**{k: v for k, v in fields.items() if v is not None and v != []})


# The values of mem's enums (memcli/enums.py) as the tools' schemas list them (a Literal:
# the tools validate strictly, and strict pydantic takes an Enum only as an instance).
Budget = Literal[enums.Budget.values()]  # type: ignore[valid-type]
TagsMatch = Literal[enums.TagsMatch.values()]  # type: ignore[valid-type]
FactType = Literal[enums.FactType.values()]  # type: ignore[valid-type]


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


def build_server(memory: Any) -> Any:
    """The MCP server with mem's tools bound to one Memory (its store and models, loaded
    once for every call)."""
    from mcp.server.mcpserver.exceptions import ToolError

    # INFO logs every call on stderr; an agent's host shows stderr to its user.
    server = _server_class()(
        "mem", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    def private(message: str) -> str:
        """An error as an agent may see it: the store's path on this machine is not the
        agent's business (it may be shown to, or logged by, a third party)."""
        for shown in {str(memory.db.resolve()), str(memory.db)}:
            message = message.replace(shown, "the store")
        return message

    def run(fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Call the Memory; its one-line errors (bad date, unknown bank, locked store...)
        as tool errors, each naming the tool's argument it is about."""
        from memcli.cliutil import describe_unexpected
        from memcli.errors import MemError

        try:
            return fn(*args, **kwargs)
        except MemError as exc:
            raise ToolError(private(exc.describe())) from None
        except Exception as exc:  # noqa: BLE001 - a tool error, never a dead server
            raise ToolError(private(describe_unexpected(exc))) from None

    @server.tool(
        name="retain",
        description="Remember a piece of text (a note, a decision, a dialog turn). It is split "
        "into facts with their entities and dates, linked and embedded. Returns what was stored "
        "(the same JSON as `mem retain --json`).",
    )
    def retain(
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
            str | None,
            Field(description="Document id: retaining the same id again replaces it."),
        ] = None,
        bank: Annotated[
            str | None, Field(description="Memory bank (default: the server's).")
        ] = None,
    ) -> dict[str, Any]:
        return run(
            lambda: memory.retain(
                text,
                at=at,
                context=context,
                tags=tags,
                type=type,
                document_id=document_id,
                bank=bank,
            ).to_json()
        )

    @server.tool(
        name="recall",
        description="Recall the memories that best answer a query, best first, sized to a "
        "token budget (the same JSON as `mem recall --format json`). Each result has "
        "mentioned_at (when it was said) and occurred_start/occurred_end (when what it talks "
        "about happens).",
    )
    def recall(
        query: Annotated[str, Field(description="A question or keywords.", min_length=1)],
        budget: Annotated[
            Budget | None,
            Field(
                description="Candidates per arm: low 100, mid 300, high 1000 (default: the "
                "server's budget setting, else mid)."
            ),
        ] = None,
        max_tokens: Annotated[
            int | None,
            Field(
                description="Token budget of the memories returned (default: the server's "
                "max_tokens setting, else 4096).",
                gt=0,
                le=INT64_MAX,
            ),
        ] = None,
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
        now: Annotated[
            str | None,
            Field(description="Reference time for recency and relative dates in the query."),
        ] = None,
        as_of: Annotated[
            str | None,
            Field(description="Answer as the memory stood at this time (ISO date)."),
        ] = None,
        bank: Annotated[
            str | None, Field(description="Memory bank (default: the server's).")
        ] = None,
    ) -> dict[str, Any]:
        return run(
            lambda: memory.recall(
                query,
                budget=budget,
                max_tokens=max_tokens,
                limit=limit,
                tags=tags,
                tags_match=tags_match,
                now=now,
                as_of=as_of,
                bank=bank,
            ).to_json()
        )

    @server.tool(
        name="list",
        description="List stored memories, newest said first, optionally filtered: "
        '{"facts": [...]}, the array `mem list --format json` prints. Use it to find fact '
        "ids for `forget`.",
    )
    def list_memories(
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
        limit: Annotated[int, Field(description="At most this many.", gt=0, le=1000)] = 50,
        offset: Annotated[int, Field(description="Skip this many first.", ge=0, le=INT64_MAX)] = 0,
        bank: Annotated[str | None, Field(description="Memory bank.")] = None,
    ) -> dict[str, Any]:
        def listed() -> dict[str, Any]:
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
            facts = memory.list(selection, limit=limit, offset=offset, bank=bank)
            # An object, not the bare array: the SDK gives an array one content block per
            # item, and none at all when it is empty.
            return {"facts": [f.to_json() for f in facts]}

        return run(listed)

    @server.tool(
        name="forget",
        description="Forget memories for good (every table, one transaction). Say what: fact "
        "ids, a document, a source id, tags, a speaker, a time range or a query. With "
        "dry_run, only report what would go. The same JSON as `mem forget --format json`.",
    )
    def forget(
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
        dry_run: Annotated[bool, Field(description="Change nothing; say what would go.")] = False,
        bank: Annotated[str | None, Field(description="Memory bank.")] = None,
    ) -> dict[str, Any]:
        def forgotten() -> dict[str, Any]:
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
            return memory.forget(selection, dry_run=dry_run, bank=bank).to_json()

        return run(forgotten)

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
