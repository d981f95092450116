"""The `mem` command: parse options, call the library, print. Nothing here does the work.

Heavy imports (numpy, apsw, llama.cpp, dateparser) happen inside commands, so `mem --help`
stays fast and loads no model.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from memcli import __version__
from memcli.bench.command import bench as bench_command
from memcli.cliparams import install as install_plain_params
from memcli.cliutil import (
    STDIN_CLOSED,
    Budget,
    FormatTextJson,
    JsonFlag,
    TagsMatch,
    configured,
    echo_after_commit,
    errors,
    exit_interrupted,
    fail,
    fail_error,
    flag_of,
    info,
    interrupt_reported,
    require_store,
    state,
    wants_json,
)
from memcli.cliutil import memory as cli_memory
from memcli.commands import register_commands
from memcli.errors import MemError
from memcli.helpstyle import add_examples, fit_help, plain_value_names
from memcli.paths import file_identity, is_store_file

app = typer.Typer(
    name="mem",
    help="A command-line memory for people and AI agents: retain text, recall what matters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
    md = "md"


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"mem {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    db: Annotated[
        str | None,  # not a Path: a postgresql:// URL's "//" would collapse
        typer.Option(
            "--db",
            metavar="FILE|URL",
            help="Database file, or a postgresql:// URL (a PostgreSQL server with pgvector). "
            "Default: $MEM_DB, the config's db, else the user data dir.",
        ),
    ] = None,
    bank: Annotated[
        str | None,
        typer.Option(
            "--bank",
            metavar="NAME",
            help="Memory bank inside the file. Default: $MEM_BANK, the config's bank, "
            "else 'default'.",
        ),
    ] = None,
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=version_callback, is_eager=True, help="Show version."),
    ] = None,
) -> None:
    # Read the config file and environment afresh on every invocation (tests run many in
    # one process).
    state.settings = None
    state.sources = {}
    if ctx.invoked_subcommand == "config":
        # `mem config` must work to repair a broken config file: it resolves nothing here,
        # only keeps the global flags for `mem config show`.
        state.flags = {"db": str(db) if db else None, "bank": bank}
        return
    from memcli.paths import store_location_problem

    if db is not None and not db.strip():
        fail("--db: the value is empty", 2)
    if db is not None and store_location_problem(db):
        fail(f"--db: {store_location_problem(db)}", 2)
    from memcli.storeurl import location_of

    # A Path (~ expanded), or a StoreURL for a postgresql:// URL (a URL of another scheme
    # or a bad one is refused above, or by the config for MEM_DB and the config file).
    state.db = location_of(configured("db", db or None))
    state.bank = configured("bank", bank)
    from memcli.labels import bank_name_problem

    problem = bank_name_problem(state.bank)
    if problem:  # before any file is opened or made
        source = state.sources["bank"].source
        fail(f"{'--bank' if source == 'flag' else source}: {problem}", 2)
    busy = os.environ.get("MEM_BUSY_TIMEOUT_MS")
    if busy:  # empty is not set, as for every MEM_ variable
        from memcli.store.types import busy_timeout_problem

        problem = busy_timeout_problem(busy)
        if problem:
            fail(f"$MEM_BUSY_TIMEOUT_MS: {problem}")  # a setting, not a usage error
    threads = configured("threads")
    if state.sources["threads"].source.startswith("config"):
        # The embedder reads MEM_THREADS when llama.cpp loads (memcli/models/embedder.py).
        os.environ["MEM_THREADS"] = str(threads)


# --------------------------------------------------------------------------------------------
# retain


def _read_bytes(path: Path) -> tuple[bytes, str]:
    """A file's bytes ('-': stdin's) and its name for messages."""
    if str(path) == "-":
        if state.stdin_closed:
            fail(STDIN_CLOSED, 2)
        return sys.stdin.buffer.read(), "stdin"
    if is_store_file(path, state.db):
        fail(f"{path} is the store itself (or its log), not input to read")
    try:
        return path.read_bytes(), str(path)
    except IsADirectoryError:
        fail(f"{path} is a folder: `mem sync {path}` keeps a folder and the bank in step")
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}")


def _file_document(
    path: Path, defaults: dict[str, Any], document: str | None, supersedes: int | None
) -> Any:
    """A --file as a document (memcli/sources/documents.py): its resolved path is its
    document unless --document names one (a correction, --supersedes, has none)."""
    from memcli.retain import RetainError
    from memcli.sources.documents import file_document
    from memcli.sources.markdown import NoteError

    data, name = _read_bytes(path)
    try:
        body = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        fail(f"{name} is not UTF-8 text (bad byte at offset {exc.start})")
    doc_id = document
    if doc_id is None and supersedes is None:
        doc_id = str(path.resolve())
    try:
        return file_document(str(path), data, body, defaults, doc_id)
    except (NoteError, RetainError) as exc:
        fail(str(exc))


def _read_text_file(path: Path) -> str:
    data, name = _read_bytes(path)
    try:
        # utf-8-sig: a byte order mark (Notepad writes one) is no part of the text.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        fail(f"{name} is not UTF-8 text (bad byte at offset {exc.start})")


@app.command()
def retain(
    text: Annotated[
        list[str] | None, typer.Argument(help="Text to remember; '-' reads stdin.")
    ] = None,
    file: Annotated[
        list[Path] | None, typer.Option("--file", "-f", help="Read a text file (repeatable).")
    ] = None,
    jsonl: Annotated[
        list[str] | None,
        typer.Option(
            "--jsonl",
            help='JSONL batch (path or -; repeatable): {"id", "text", "timestamp", "context", '
            '"tags", "type", "document_id", "metadata"}, only text required.',
        ),
    ] = None,
    at: Annotated[
        str | None, typer.Option("--at", help="When this was said (ISO or natural language).")
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", help="Who said it / where it comes from.")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Tag (repeatable).")] = None,
    fact_type: Annotated[
        str | None, typer.Option("--type", help="world | experience | observation.")
    ] = None,
    document: Annotated[
        str | None,
        typer.Option("--document", help="Document id: retaining it again replaces it."),
    ] = None,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Skip bad JSONL lines instead of failing.")
    ] = False,
    append: Annotated[
        bool,
        typer.Option(
            "--append",
            help="Add the items to their existing documents instead of replacing them.",
        ),
    ] = False,
    no_speakers: Annotated[
        bool,
        typer.Option(
            "--no-speakers",
            help="Keep 'Name: ...' lines as written: read no speakers from a transcript.",
        ),
    ] = False,
    output: FormatTextJson = None,
    as_json: JsonFlag = False,
    supersedes: Annotated[
        int | None,
        typer.Option("--supersedes", help="This corrects fact ID: close its validity."),
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            metavar="NAME|PATH",
            help="Embedding model: e5, minilm or a GGUF path. Default: $MEM_EMBEDDER, else the "
            "bank's model, else for a new bank the one its text suits (mostly CJK: e5).",
        ),
    ] = None,
) -> None:
    """Remember text: split it into facts, find entities and dates, link and embed them."""
    as_json = wants_json(as_json, output)
    from memcli import progress as progress_mod
    from memcli import render
    from memcli.ingest import InputError, decode_lines, items_from_jsonl, items_from_text

    memory = cli_memory(embedder)
    with errors():
        defaults = memory.item_defaults(
            at=at,
            context=context,
            tags=tag,
            type=fact_type,
            document_id=document,
            supersedes=supersedes,
        )
    if text and "-" in text and text != ["-"]:
        fail("'-' reads the text from stdin: give it alone, not with other words", 2)
    from_stdin = (
        (text == ["-"])
        + sum(str(p) == "-" for p in file or [])
        + sum(p == "-" for p in jsonl or [])
    )
    if from_stdin > 1:
        fail("stdin can be read once: give '-' to only one of TEXT, --file and --jsonl", 2)
    items = []
    invalid = 0
    try:
        texts: list[tuple[str, str | None]] = []
        if text:
            if text == ["-"]:
                texts.append((_read_text_file(Path("-")), None))
            else:
                texts.append((" ".join(text), None))
        file_docs = []
        for path in file or []:
            if str(path) == "-":
                texts.append((_read_text_file(path), str(path)))
            else:
                file_docs.append(_file_document(path, defaults, document, supersedes))
        for body, origin in texts:
            items.append(items_from_text(body, origin, defaults))
        for doc in file_docs:
            items.extend(doc.items)
        for path in jsonl or []:
            if not path:
                fail("--jsonl needs a file path, or - for stdin", 2)
            raw = decode_lines(_read_bytes(Path(path))[0])
            try:
                batch, skipped = items_from_jsonl(raw, defaults, skip_invalid=skip_invalid)
            except InputError as exc:
                # Which of several files the line number is in.
                raise InputError(f"{path}: {exc}" if len(jsonl) > 1 else str(exc)) from None
            items.extend(batch)
            invalid += skipped
    except InputError as exc:
        # Input that was given and holds nothing (text of spaces, an empty file) is an
        # error in the data (1), as an empty --jsonl is; no input at all is a usage error.
        fail(exc.describe(flag_of))
    if not items:
        skipped = f" ({invalid} invalid lines skipped)" if invalid else ""
        if jsonl and not text and not file and not invalid:
            fail("nothing to retain: the --jsonl input has no lines")
        # Nothing given at all is a usage error; input given that holds nothing is not.
        given = bool(text or file or jsonl)
        fail(
            f"nothing to retain{skipped}: give text, '-' for stdin, --file or --jsonl",
            1 if given else 2,
        )
    with errors(), progress_mod.bar(len(items), "retaining") as advance:
        result = memory.retain(
            items=items,
            documents=file_docs,
            supersedes=supersedes,
            append=append,
            hints=as_json,
            invalid=invalid,
            progress=advance,
            speakers=not no_speakers,
        )
    memory.close()
    for label in result.unchanged:
        info(f"mem: {label} is as it was retained: skipped")
    if result.unchanged and not result.summary.items:
        info("nothing new to retain: every file is as it was retained")
        return
    if as_json:
        echo_after_commit(render.dumps(result.to_json()), result.line())
    if result.warning:
        info(f"mem: warning: {result.warning}")
    info(result.line())
    if result.interrupted:
        exit_interrupted()


# --------------------------------------------------------------------------------------------
# recall


def _preload_query_embedder(flag: str | None, arms: str | None) -> None:
    """Start loading the embedder a recall will most likely need (the one asked for, else
    the default every English bank uses) while it imports, opens the store and reads the
    bank: on a second core that hides most of the model's load. A bank made with another
    model loads its own when it needs it; a keyword-only recall loads none."""
    from memcli.models.choice import DEFAULT_NAME
    from memcli.models.preload import preload_embedder

    if arms is not None and not {a.strip() for a in arms.split(",")} & VECTOR_ARMS:
        return
    preload_embedder(configured("embedder", flag) or DEFAULT_NAME)


VECTOR_ARMS = {"semantic", "graph", "temporal", "document"}


@app.command()
def recall(
    query: Annotated[str | None, typer.Argument(help="What to search the memories for.")] = None,
    budget: Annotated[
        Budget | None,
        typer.Option(
            help="Candidates per arm: low 100, mid 300, high 1000. Default: $MEM_BUDGET, "
            "the config's budget, else mid.",
            show_default=False,
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Token budget of the output. Default: $MEM_MAX_TOKENS, the config's "
            "max_tokens, else 4096.",
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="At most this many memories.")] = None,
    fact_type: Annotated[
        list[str] | None, typer.Option("--type", help="Only these fact types (repeatable).")
    ] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Filter by tag (repeatable).")
    ] = None,
    tags_match: Annotated[TagsMatch, typer.Option(help="How --tag filters.")] = TagsMatch.any,
    now: Annotated[
        str | None, typer.Option(help="Reference time for recency and relative dates in the query.")
    ] = None,
    include_chunks: Annotated[
        bool, typer.Option("--include-chunks", help="Also print the source chunks.")
    ] = False,
    max_chunk_tokens: Annotated[int, typer.Option(help="Token budget for chunks.")] = 8192,
    reranker: Annotated[
        str | None, typer.Option(help="GGUF cross-encoder (RANK pooling); env MEM_RERANKER.")
    ] = None,
    no_rerank: Annotated[bool, typer.Option("--no-rerank", help="Do not rerank.")] = False,
    no_boosts: Annotated[
        bool, typer.Option("--no-boosts", help="No recency/temporal/proof/speaker boosts.")
    ] = False,
    arms: Annotated[
        str | None, typer.Option(help="Comma-separated arms to run (default all four).")
    ] = None,
    min_score: Annotated[
        float | None, typer.Option(help="Drop memories whose final score is below this.")
    ] = None,
    output: Annotated[
        OutputFormat | None,
        typer.Option(
            "--format",
            help="Output format. Default: $MEM_FORMAT, the config's format, else text.",
            show_default=False,
        ),
    ] = None,
    trace: Annotated[
        bool, typer.Option("--trace", help="Show how each memory was ranked.")
    ] = False,
    batch: Annotated[
        str | None,
        typer.Option(help='JSONL of {"id","query","now"?,...options} (path or -); JSONL out.'),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option("--as-of", help="Answer as the store stood at WHEN (before corrections)."),
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            metavar="NAME|PATH",
            help="Embedding model (e5, minilm or a GGUF path). Default: $MEM_EMBEDDER, else "
            "the model the bank was made with.",
        ),
    ] = None,
) -> None:
    """Recall the memories that best answer QUERY, sized to a token budget."""
    from memcli import render
    from memcli.display import count, has_visible_text
    from memcli.recall.pipeline import collector_paused

    if (query is None) == (batch is None):
        fail("give a QUERY or --batch (one of them)", 2)
    _preload_query_embedder(embedder, arms)
    # Settings not given as flags come from MEM_* or the config file (memcli/config.py).
    budget = Budget(configured("budget", budget.value if budget else None))
    max_tokens = configured("max_tokens", max_tokens)
    output = OutputFormat(configured("format", output.value if output else None))
    memory = cli_memory(embedder, None if no_rerank else configured("reranker", reranker))
    with errors():
        base = memory.recall_options(
            budget=budget,
            max_tokens=max_tokens,
            limit=limit,
            types=fact_type,
            tags=tag,
            tags_match=tags_match,
            now=now,
            as_of=as_of,
            include_chunks=include_chunks,
            max_chunk_tokens=max_chunk_tokens,
            rerank=not no_rerank,
            boosts=not no_boosts,
            arms=[a.strip() for a in arms.split(",")] if arms is not None else None,
            min_score=min_score,
        )
    if query is not None and not has_visible_text(query):
        bad = _undecodable_input()  # $'\xff' reaches Python as a lone surrogate, no letter
        if bad:
            fail(f"{bad} is not valid UTF-8 text", 2)
    # A person at a terminal who mistyped --db hears so (an agent, through MCP, gets no
    # memories: memcli/memory.py).
    require_store(memory)
    with errors():
        if batch is not None:
            from memcli.ingest import InputError, recall_requests

            try:
                requests = recall_requests(_read_text_file(Path(batch)), base, state.bank)
            except InputError as exc:
                fail_error(exc)
            for number, (_, bank, _, _) in enumerate(requests, start=1):
                try:  # every bank before the first answer, as every line's syntax is
                    memory.require_bank(bank)
                except MemError as exc:
                    fail(f"--batch request {number}: {exc}; nothing was recalled")
            for request_id, bank, q, options in requests:
                # The collector stays off through the answer's JSON too: started between the
                # recall and its output, it scanned the thousands of objects the recall
                # left (~1 ms a query).
                with collector_paused():
                    result = memory.recall_with(q, options, bank=bank)
                    line = render.dumps({"id": request_id, **result.to_json(trace)})
                    del result
                typer.echo(line)
            memory.close()
            return
        result = memory.recall_with(query, base)
    memory.close()

    if output is OutputFormat.json:
        obj = result.to_json(trace)
        if trace:
            obj["trace"]["sources"] = render.sources_json(state.sources)
        typer.echo(render.dumps(obj))
        return
    if output is OutputFormat.md:
        markdown = render.to_markdown(result)
        if markdown:
            typer.echo(markdown, nl=False)
        elif result.results or _cut_by_budget(result):
            fail(
                f"--max-tokens {result.max_tokens} cannot hold the Markdown heading and one "
                "memory: give more",
                2,
            )
    else:
        body = render.to_text(result, decorate=sys.stdout.isatty())
        if body:
            typer.echo(body)
        elif result.results or _cut_by_budget(result):
            # Memories matched, and the budget cannot hold the header line and one of them:
            # a usage error, whether the memory fit alone (a bigger budget failed so) or not.
            from memcli.blocks import block_tokens
            from memcli.tokens import count_tokens

            passing = result.results or _above_min_score(result)[:50]
            tokens = {id(c): c.tokens or block_tokens(c.fact) for c in passing}
            small = min(passing, key=lambda c: tokens[id(c)])
            # The header with that memory (its legend depends on the memories shown).
            header = count_tokens(render.text_header(result, [small]) + "\n\n")
            need = max(header + tokens[id(small)] + 1, result.max_tokens + 1)
            fail(
                f"--max-tokens {result.max_tokens} cannot hold the header line and one "
                f"memory: give at least {need}",
                2,
            )
    if not result.results:
        # Candidates but none kept: the budget (or --min-score) cut them, not the query.
        if not result.ranked:
            info("no memories matched")
        elif result.passed is False:
            info(
                f"nothing relevant: none of {count(len(result.ranked), 'memory', 'memories')} "
                "reaches the relevance floor (--min-score 0 shows the nearest anyway)"
            )
        else:
            info(
                f"{count(len(result.ranked), 'memory', 'memories')} matched but none fit "
                f"--max-tokens {result.max_tokens} or --min-score"
            )
    if trace:
        typer.echo("")
        # The rows of what the text printed (a tight budget pays the header line first and
        # may fit other memories than the JSON's).
        shown = render.text_results(result) if output is OutputFormat.text else None
        table = (
            render.to_trace_table(result, shown=shown) + "\n" + render.sources_text(state.sources)
        )
        # In Markdown, a fenced block: the table's rule under its header line read as a
        # heading, and its rows ran into one paragraph.
        typer.echo(f"```text\n{table}\n```" if output is OutputFormat.md else table)


def _above_min_score(result: Any) -> list[Any]:
    """The candidates the budget may show: above --min-score, or those the relevance floor
    shows when one was applied (none of a question that did not pass)."""
    if result.floor is not None:
        return [c for c in result.ranked if result.passed and result.floor.shows(c.relevance)]
    floor = result.min_score
    return [c for c in result.ranked if floor is None or c.final >= floor]


def _cut_by_budget(result: Any) -> bool:
    """Whether candidates passed --min-score but the budget kept none."""
    return not result.results and bool(_above_min_score(result)[:1])


# --------------------------------------------------------------------------------------------
# stats


@app.command()
def stats(
    output: FormatTextJson = None,
    as_json: JsonFlag = False,
) -> None:
    """Show the banks in the database and how much each holds."""
    as_json = wants_json(as_json, output)
    from memcli.display import count, memory_days

    memory = cli_memory()
    require_store(memory)
    with errors():
        stats = memory.stats()
    if as_json:
        typer.echo(json.dumps(stats.to_json()))
        return
    rows = stats.banks
    days = [memory_days(r) for r in rows]
    typer.echo(stats.db)
    for r, span in zip(rows, days):
        fp = f" ({r['embedder_fingerprint'][:12]})" if r["embedder_fingerprint"] else ""
        typer.echo(
            f"  {r['bank']}: {count(r['facts'], 'fact')}, "
            f"{count(r['entities'], 'entity', 'entities')}, {count(r['links'], 'link')}, "
            f"{span}, "
            f"embedder {r['embedder'] or 'none yet'}{fp}"
        )


# --------------------------------------------------------------------------------------------
# bench (its options live beside the runner; the module imports only typer at start-up)

app.command("bench")(bench_command)

# Commands that live in their own modules (memcli/commands/); each module's register(app)
# adds its commands. Their imports stay inside the commands, so start-up stays light.
register_commands(app)
# Value names instead of Python types, and an example per command, in every --help.
plain_value_names()
fit_help()
add_examples(app)
install_plain_params()


# Options of `mem` itself that take a value: the word after one is not a command name.
_MAIN_VALUE_OPTIONS = frozenset({"--db", "--bank"})


def invoked_command(argv: list[str]) -> str | None:
    """The command a command line names (`mem [--db FILE] [--bank NAME] COMMAND ...`), or
    None when it names none (`mem`, `mem --help`, `mem --version`)."""
    words = iter(argv)
    for word in words:
        if word in _MAIN_VALUE_OPTIONS:
            next(words, None)
        elif word == "--":
            return None
        elif not word.startswith("-"):
            return word
    return None


@contextmanager
def only_command(name: str | None) -> Iterator[None]:
    """Let typer build only the named command. typer makes a click command of every
    registered one on each start, reading each function's signature (~30 ms of a cold recall
    for mem's 19); a command line that names a command needs that one alone. A name that is
    no command (a typo, a group such as `models`) keeps them all, for typer's own errors,
    suggestions and help."""
    chosen = [c for c in app.registered_commands if _command_name(c) == name]
    if not chosen:
        yield
        return
    saved = app.registered_commands, app.registered_groups
    app.registered_commands, app.registered_groups = chosen, []
    try:
        yield
    finally:
        app.registered_commands, app.registered_groups = saved


def _command_name(info: Any) -> str:
    """The name typer gives a registered command."""
    return info.name or typer.main.get_command_name(info.callback.__name__)


def exit_now(code: object) -> NoReturn:
    """End the process as sys.exit(code) would, without the interpreter's teardown: freeing
    every module and object (numpy's, llama.cpp's) took ~40 ms of a ~0.4 s cold recall and
    does nothing a user can see. What teardown would do that matters is done first: atexit
    handlers run, every SQLite connection still open is closed (so the last one checkpoints
    the WAL into the store file, as at any close) and the output is flushed. Under a
    profiler or a tracer (cProfile, coverage), which write their results at teardown, it is
    a plain sys.exit."""
    import atexit

    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)  # type: ignore[arg-type]

    if code is None or isinstance(code, int):
        status = code or 0
        if status == 130 and _stop_signal is not None:
            status = 128 + _stop_signal  # stopped by SIGTERM or SIGHUP, not Ctrl-C
    else:  # sys.exit("message"): the message goes to stderr, the status is 1
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    store = sys.modules.get("memcli.store")  # loaded when a command opened a store
    if store is not None:
        store.close_all_connections()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that stopped early; a closed stream
            pass
    os._exit(status)


def _click_exceptions() -> tuple[type[Exception], type[BaseException]]:
    """click's base error (typer vendors click as typer._click) and typer's Abort."""
    try:
        from typer._click.exceptions import ClickException
    except ImportError:  # an older typer, on the click package
        from click.exceptions import ClickException
    return ClickException, typer.Abort


def _usage_line(exc: Any) -> str:
    """A click usage error in one line: the message and where help is."""
    message = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "mem"
    return f"{message} (see `{where} --help`)"


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _undecodable_input() -> str | None:
    """The first argument or MEM_ variable with bytes that are not UTF-8, as the user would
    name it ("argument 'caf\\xe9'", "MEM_BANK"), or None."""
    for arg in sys.argv[1:]:
        if _has_surrogate(arg):
            return f"argument '{os.fsencode(arg).decode('utf-8', 'backslashreplace')}'"
    for name, value in sorted(os.environ.items()):
        if name.startswith("MEM_") and _has_surrogate(value):
            return f"${name}"
    return None


def _stdout_reader_gone() -> bool:
    """Whether click or rich has met a closed stdout pipe: click wraps the streams when it
    does; rich (help pages) points file descriptor 1 at the null device and exits 1."""
    try:
        from typer._click.utils import PacifyFlushWrapper
    except ImportError:  # an older typer, on the click package
        from click.utils import PacifyFlushWrapper
    if isinstance(sys.stdout, PacifyFlushWrapper):
        return True
    now = file_identity(1)
    return now is not None and now != _stdout_at_start and now == file_identity(os.devnull)


# The commands whose results are their output (`export` has -o, and says so itself).
RESULT_COMMANDS = frozenset({"recall", "list", "show", "stats", "banks", "doctor"})


def _writable(fd: int) -> bool:
    """Whether fd is open for writing (True when that cannot be told)."""
    import fcntl

    try:
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
    except OSError:
        return True


_stdout_at_start: tuple[int, int, int] | None = None


_interrupted = False  # a SIGINT came (typer turns its KeyboardInterrupt into a silent 130)


def interrupted() -> bool:
    """Whether a SIGINT came during this run (prompts tell Ctrl-C from end of input)."""
    return _interrupted


def _on_sigint(signum: int, frame: Any) -> None:
    """Ctrl-C: KeyboardInterrupt, as Python's own handler raises it, noted for the exit
    message; inside llama.cpp's log callback ctypes would swallow it, so it is raised when
    the decode returns (models/llama_lib.py)."""
    global _interrupted
    _interrupted = True
    llama_lib = sys.modules.get("memcli.models.llama_lib")
    if llama_lib is not None and llama_lib.defer_interrupt_in_callback(frame):
        return
    raise KeyboardInterrupt


_stop_signal: int | None = None  # SIGTERM or SIGHUP came: stopped as by Ctrl-C


def _on_stop(signum: int, frame: Any) -> None:
    """SIGTERM (`timeout`, `kill`) and SIGHUP (a closed terminal): stop as Ctrl-C does, so
    a progress bar gives the terminal its cursor back (it stayed hidden) and a retain keeps
    its committed batches; the exit status is 128 + the signal's number."""
    global _stop_signal
    _stop_signal = signum
    _on_sigint(signum, frame)


def main() -> None:
    """The console entry point. No traceback reaches a user: an error the library did not
    turn into a one-line message is still printed as one line (MEM_DEBUG=1 shows the
    traceback, for bug reports)."""
    import signal

    global _stdout_at_start
    _stdout_at_start = file_identity(1)
    columns = os.environ.get("COLUMNS", "")
    if columns and not (columns.isdigit() and int(columns) > 0):
        # COLUMNS=0 made --help print nothing (rich laid it out in no width): the terminal's
        # own width is asked instead.
        del os.environ["COLUMNS"]
    state.stdout_closed = sys.stdout is None
    state.stdin_closed = sys.stdin is None
    if state.stdin_closed:
        # Closed by the caller (`<&-`, a service without one): Python leaves it None, and
        # a question or a read of '-' failed with "unexpected AttributeError". It reads as
        # empty and is not a terminal; '-' names it closed (STDIN_CLOSED).
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None or (name == "stderr" and not _writable(2)):
            # Closed by the caller (`2>&-`, `>&-`): Python leaves the stream None, and every
            # write or flush raised after the work was done (a stored retain exited 1). What
            # is written goes nowhere, as to a reader that went away. So does a message to
            # a stderr opened for reading only (`2</dev/null`); results on such a stdout
            # are not delivered, which is an error.
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
    command = invoked_command(sys.argv[1:])
    if state.stdout_closed and command in RESULT_COMMANDS and "--help" not in sys.argv:
        # Their results are the point: exit 0 having printed nothing read as "no memories".
        typer.echo("mem: error: stdout is closed: nothing would receive the results", err=True)
        exit_now(1)
    click_error, click_abort = _click_exceptions()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    for stop in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(stop) is signal.SIG_DFL:  # not one nohup or a parent ignores
            signal.signal(stop, _on_stop)
    try:
        with only_command(command):
            # Not standalone: a usage error comes here as an exception, to be printed as
            # one line instead of typer's framed box; --help and typer.Exit return a code.
            code = app(standalone_mode=False)
        if code == 130 and _interrupted and not interrupt_reported():
            typer.echo("mem: interrupted", err=True)
        exit_now(code if isinstance(code, int) else 0)
    except SystemExit as done:  # fail() and exit_now end a run with SystemExit
        # click ends a run whose stdout reader went away (EPIPE) with a silent exit 1, after
        # a write command has committed; it ends as the readers' `| head` does: quietly, 0.
        exit_now(0 if _stdout_reader_gone() else done.code)
    except click_error as exc:
        if exc.format_message().strip():  # empty: bare `mem`, whose help typer has printed
            typer.echo(f"mem: error: {_usage_line(exc)}", err=True)
        exit_now(exc.exit_code)
    except (KeyboardInterrupt, click_abort):
        typer.echo("mem: interrupted", err=True)
        exit_now(130)
    except Exception as exc:  # noqa: BLE001 - last line of defence, see docstring
        if os.environ.get("MEM_DEBUG"):
            raise
        if isinstance(exc, UnicodeEncodeError):
            # Bytes that are not UTF-8 in an argument or a MEM_ variable reach Python as lone
            # surrogates, which SQLite cannot take (file names may: files open by bytes).
            bad = _undecodable_input()
            if bad is not None:
                typer.echo(f"mem: error: {bad} is not valid UTF-8 text", err=True)
                exit_now(2)
        from memcli.cliutil import describe_unexpected

        typer.echo(f"mem: error: {describe_unexpected(exc)}", err=True)
        sys.exit(1)
