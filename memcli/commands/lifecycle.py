"""`mem list`, `show`, `forget`, `correct`, `export`, `import`, `reembed` and `banks`: parse,
call the Memory (memcli/memory.py), print. Results on stdout (text, json or jsonl),
messages and progress on stderr; anything that deletes asks first at a terminal and
refuses without --yes elsewhere."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from memcli.cliutil import (
    TagsMatch,
    echo_after_commit,
    errors,
    exit_interrupted,
    fail,
    info,
    require_store,
    state,
)
from memcli.cliutil import memory as cli_memory
from memcli.display import one_line, terminal_safe
from memcli.sources import IMPORT_FORMATS


class Format(str, Enum):
    text = "text"
    json = "json"
    jsonl = "jsonl"


FormatOpt = Annotated[Format, typer.Option("--format", help="text, json or jsonl.")]
ImportFormat = Enum("ImportFormat", {f: f for f in IMPORT_FORMATS}, type=str)  # type: ignore[misc]
TagOpt = Annotated[list[str] | None, typer.Option("--tag", help="Tag (repeatable).")]
TagsMatchOpt = Annotated[TagsMatch, typer.Option(help="How --tag selects.")]
TypeOpt = Annotated[
    list[str] | None, typer.Option("--type", help="world | experience | observation (repeatable).")
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


@contextmanager
def _stdout_pipe() -> Iterator[None]:
    """A reader that stops early (`| head`) ends the output quietly, not with a traceback."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(0) from None


def _write_lines(lines: Iterable[str]) -> None:
    out = sys.stdout
    for line in lines:
        out.write(line)
        out.write("\n")


_ENCODER = json.JSONEncoder(ensure_ascii=False)  # built once, not per line


def _dumps(obj: Any) -> str:
    return _ENCODER.encode(obj)


def _json_array(objs: Iterable[Any]) -> Iterator[str]:
    """A JSON array written element by element (bounded memory for any number of facts)."""
    first = True
    for obj in objs:
        yield ("[" if first else ",") + _dumps(obj)
        first = False
    yield "[]" if first else "]"


def _confirm(question: str, yes: bool, refusal: str) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        fail(f"{refusal} without confirmation: add --yes (stdin is not a terminal)")
    # Our own question, not typer.confirm: click wrote the prompt's last space through
    # input(), to stdout, so a redirected result began with a space.
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    answer = sys.stdin.readline()  # Ctrl-C raises KeyboardInterrupt: interrupted (130)
    if not answer:
        typer.echo("", err=True)  # end of input (Ctrl-D) at the question: the answer is no
    if answer.strip().lower() not in ("y", "yes"):
        fail("cancelled; nothing was changed")


def _happened(start: str, end: str | None) -> str:
    """A period as list shows it (its last day, not the exclusive end: "2026-05-09..
    2026-05-16" read "through May 17" as "2026-05-09T00:00:00 .. 2026-05-17T00:00:00"), then
    its exact bounds."""
    from datetime import datetime

    from memcli.blocks import period_text

    brief = period_text(datetime.fromisoformat(start), end and datetime.fromisoformat(end))
    return f"{brief}  (from {start} until {end})" if end else brief


def _fact_line(f: Any) -> str:
    from memcli.blocks import memory_block
    from memcli.clock import local_text

    line = f"{f.id:>6}  {memory_block(f)}"
    if f.tags:
        line += "  {" + ", ".join(one_line(t) for t in f.tags) + "}"
    if f.invalid_at is not None:
        by = f" by {f.superseded_by}" if f.superseded_by else ""
        line += f"  (corrected{by} at {local_text(f.invalid_at)})"
    return terminal_safe(line)


# --------------------------------------------------------------------------------------------


def list_memories(
    document: Annotated[str | None, typer.Option(help="Only this document's facts.")] = None,
    source_id: Annotated[str | None, typer.Option(help="Only facts of this input id.")] = None,
    tag: TagOpt = None,
    tags_match: TagsMatchOpt = TagsMatch.any_strict,
    fact_type: TypeOpt = None,
    context: Annotated[str | None, typer.Option(help="Only this speaker / source.")] = None,
    since: Annotated[str | None, typer.Option(help="Said at or after WHEN.")] = None,
    until: Annotated[str | None, typer.Option(help="Said before WHEN.")] = None,
    limit: Annotated[int | None, typer.Option(help="At most this many.")] = None,
    offset: Annotated[int, typer.Option(help="Skip this many first.")] = 0,
    include_invalid: Annotated[
        bool, typer.Option("--include-invalid", help="Also facts a correction has closed.")
    ] = False,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="As the store stood at WHEN.")
    ] = None,
    output: FormatOpt = Format.text,
) -> None:
    """List memories, newest first (streamed: any size of store)."""
    memory = cli_memory()
    with errors():
        sel = memory.selection(
            document_id=document,
            source_id=source_id,
            tags=tag,
            tags_match=tags_match,
            types=fact_type,
            context=context,
            since=since,
            until=until,
            include_invalid=include_invalid,
            as_of=as_of,
        )
        require_store(memory)
        with _stdout_pipe():
            facts = memory.iter_facts(sel, limit=limit, offset=offset)
            if output is Format.text:
                _write_lines(_fact_line(f.fact) for f in facts)
            elif output is Format.jsonl:
                _write_lines(_dumps(f.to_json()) for f in facts)
            else:
                _write_lines(_json_array(f.to_json() for f in facts))
    memory.close()


def show(
    fact_ids: Annotated[list[int], typer.Argument(help="Fact ids.", show_default=False)],
    output: FormatOpt = Format.text,
) -> None:
    """Show memories whole: times, validity, entities, links, correction history."""
    memory = cli_memory()
    with errors():
        shown = [d.to_json() for d in memory.show(fact_ids)]
    memory.close()
    with _stdout_pipe():
        if output is Format.json:
            _write_lines([_dumps(shown)])
        elif output is Format.jsonl:
            _write_lines(_dumps(s) for s in shown)
        else:
            _write_lines(terminal_safe("\n\n".join(_show_text(s) for s in shown)).split("\n"))


def _show_text(s: dict[str, Any]) -> str:
    from memcli.clock import local_text

    # Instants in local time with their offset; a period ("happened") is already a span of
    # the speaker's calendar.
    s = {
        **s,
        **{k: local_text(s[k]) for k in ("invalid_at", "mentioned_at", "valid_from", "created_at")},
        "history": [
            {
                **h,
                "valid_from": local_text(h["valid_from"]),
                "invalid_at": local_text(h["invalid_at"]),
            }
            for h in s["history"]
        ],
    }
    state_text = (
        f"corrected at {s['invalid_at']}"
        + (f" by {s['superseded_by']}" if s["superseded_by"] else "")
        if s["invalid_at"]
        else "valid"
    )
    rows = [
        ("text", s["text"]),
        ("context", s["context"]),
        ("type", s["type"]),
        ("said", s["mentioned_at"]),
        ("happened", s["occurred_start"] and _happened(s["occurred_start"], s["occurred_end"])),
        (
            "valid",
            f"from {s['valid_from']}" + (f" to {s['invalid_at']}" if s["invalid_at"] else ""),
        ),
        ("recorded", s["created_at"]),
        ("tags", ", ".join(one_line(t) for t in s["tags"]) or None),
        ("section", _section(s["metadata"])),
        ("metadata", _dumps(s["metadata"]) if s["metadata"] else None),
        # Labels on one line each (stored before labels were checked, or imported).
        ("source id", s["source_id"] and one_line(s["source_id"])),
        ("document", s["document_id"] and one_line(s["document_id"])),
        ("chunk", s["chunk_id"] and f"{s['chunk_id']}: {_cut(s['chunk'] or '', 160)}"),
        ("entities", ", ".join(f"{e['name']} ({e['id']})" for e in s["entities"]) or None),
        (
            "embedder",
            (s["embedder"] or "none")
            + (f" ({s['embedder_fingerprint'][:12]})" if s["embedder_fingerprint"] else "")
            + ("" if s["has_vector"] else ", no vector"),
        ),
    ]
    out = [f"fact {s['id']}  ({state_text})"]
    out += [f"  {k + ':':<10} {v}" for k, v in rows if v not in (None, "")]
    if s["links"]:
        out.append(f"  links:     {len(s['links'])}")
        for link in s["links"]:
            arrow = "->" if link["direction"] == "out" else "<-"
            out.append(
                f"    {arrow} {link['kind']:<8} {link['weight']:.2f}  {link['other']:>6}  "
                f"{_cut(link['other_text'], 70)}"
            )
    if s["history"]:
        out.append("  history:")
        for h in s["history"]:
            mark = "*" if h["id"] == s["id"] else " "
            until = f" until {h['invalid_at']}" if h["invalid_at"] else " (current)"
            out.append(
                f"   {mark}{h['id']:>6}  from {h['valid_from']}{until}  {_cut(h['text'], 60)}"
            )
    return "\n".join(out)


def _section(metadata: Any) -> str | None:
    """The section a fact belongs to (a note's headings; memcli/retain.py section_of)."""
    from memcli.retain import section_of

    section = section_of(metadata)
    return one_line(section) if section else None


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


# --------------------------------------------------------------------------------------------


def forget(
    fact_ids: Annotated[list[int] | None, typer.Argument(help="Fact ids.")] = None,
    source_id: Annotated[str | None, typer.Option(help="Facts of this input id.")] = None,
    document: Annotated[str | None, typer.Option(help="Every fact of this document.")] = None,
    tag: TagOpt = None,
    tags_match: TagsMatchOpt = TagsMatch.any_strict,
    fact_type: TypeOpt = None,
    context: Annotated[str | None, typer.Option(help="Facts of this speaker / source.")] = None,
    before: Annotated[str | None, typer.Option(help="Facts said before WHEN.")] = None,
    since: Annotated[str | None, typer.Option(help="Facts said at or after WHEN.")] = None,
    query: Annotated[
        str | None,
        typer.Option(
            help="The facts recall ranks best for this query that match it (hold one of "
            "its words, or are as close to it as linked facts)."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="With --query: at most this many.")] = 10,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be forgotten, change nothing.")
    ] = False,
    yes: YesOpt = False,
    output: FormatOpt = Format.text,
) -> None:
    """Forget memories for good: removed from every table in one transaction."""
    memory = cli_memory()
    # forget says --before where list says --until (the library's `until`).
    with errors(renames={"until": "--before"}):
        sel = memory.selection(
            ids=fact_ids,
            source_id=source_id,
            document_id=document,
            tags=tag,
            tags_match=tags_match,
            types=fact_type,
            context=context,
            until=before,
            since=since,
            query=query,
            query_limit=limit,
            include_invalid=True,
        )
        plan = memory.plan_forget(sel)
        n = len(plan.fact_ids)
        if n == 0 and not dry_run and output is not Format.text:
            typer.echo(_dumps(memory.forget(sel, plan=plan).to_json()))
        elif dry_run or n == 0:
            _print_plan(memory.forget(sel, plan=plan, dry_run=True), output, dry_run)
        if n == 0:
            info("no fact matches; nothing forgotten")
        if dry_run or n == 0:
            return
        if not yes and sys.stdin.isatty():
            # What a yes would forget, before the question (on stderr, with it).
            shown = memory.forget(sel, plan=plan, dry_run=True)
            _print_plan(shown, Format.text, dry_run=False, to_stderr=True)
        _confirm(
            f"Forget {n} facts from bank {state.bank!r}? This cannot be undone.",
            yes,
            f"refusing to forget {n} facts",
        )
        done = memory.forget(sel, plan=plan)
    memory.close()
    counts = done.counts or {}
    if output is Format.text:
        info(
            f"forgot {counts['facts']} facts ({counts['links']} links, {counts['entities']} "
            f"entities, {counts['chunks']} chunks, {counts['documents']} documents)"
            + (f"; {counts['reopened']} corrected facts valid again" if counts["reopened"] else "")
        )
    else:
        echo_after_commit(
            _dumps(done.to_json()),
            f"forgot {len(done.fact_ids)} fact{'s' if len(done.fact_ids) != 1 else ''}",
        )


def _print_plan(plan: Any, output: Format, dry_run: bool, to_stderr: bool = False) -> None:
    """A forget's plan (a dry-run ForgetResult): its JSON, or its first facts as lines."""
    if output is not Format.text:
        typer.echo(_dumps(plan.to_json()))
        return
    for f in plan.preview:
        typer.echo(_fact_line(f.fact), err=to_stderr)
    more = len(plan.fact_ids) - len(plan.preview)
    if more > 0:
        typer.echo(f"... and {more} more", err=to_stderr)
    if plan.fact_ids and dry_run:
        reopen = f"; {plan.reopens} corrected facts would be valid again" if plan.reopens else ""
        info(f"dry run: would forget {len(plan.fact_ids)} facts{reopen}")


# --------------------------------------------------------------------------------------------


def correct(
    fact_id: Annotated[int, typer.Argument(help="The fact to correct.", show_default=False)],
    text: Annotated[list[str], typer.Argument(help="Its new text.", show_default=False)],
    at: Annotated[
        str | None, typer.Option("--at", help="When the correction was made (default now).")
    ] = None,
    context: Annotated[
        str | None, typer.Option(help="Speaker of the new text (default: the old one's).")
    ] = None,
    output: FormatOpt = Format.text,
) -> None:
    """Correct a memory: store the new text, close the old fact (kept for --as-of)."""
    from memcli.clock import local_text

    memory = cli_memory()
    with errors():
        done = memory.correct(fact_id, " ".join(text), at=at, context=context)
    memory.close()
    if output is Format.text:
        when = local_text(datetime.fromisoformat(done.at))
        info(f"fact {fact_id} corrected by {', '.join(map(str, done.by))} at {when}")
    else:
        echo_after_commit(
            _dumps(done.to_json()), f"fact {fact_id} corrected by {', '.join(map(str, done.by))}"
        )


# --------------------------------------------------------------------------------------------


def export(
    bank: Annotated[
        str | None, typer.Option("--bank", help="Bank to export (default: mem --bank).")
    ] = None,
    with_vectors: Annotated[
        bool, typer.Option("--with-vectors", help="Include the embeddings (base64 float32).")
    ] = False,
    output_file: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to FILE (whole or not at all) not stdout."),
    ] = None,
) -> None:
    """Export a bank as JSONL: every fact, document, chunk, entity and link, with ids."""
    from memcli import progress as progress_mod

    name = bank or state.bank
    if output_file is not None and str(output_file) == "-":
        output_file = None  # as `mem import -` reads stdin
    if output_file is not None and not output_file.name:  # '' (typer makes it "."), ".", "/"
        fail(f"-o {str(output_file)!r} is not a file name (give a file, or - for stdout)", 2)
    memory = cli_memory()
    seen: dict[str, Any] = {}
    with errors(renames={"output": "-o"}), ExitStack() as stack:
        if output_file is not None:
            memory.export_target(output_file)  # refused before anything is read
        elif state.stdout_closed:
            # `>&-`: the export would go nowhere, and its summary said "exported".
            fail("stdout is closed: nothing would receive the export; give -o FILE")
        bar: list[Any] = []

        def on_header(header: dict[str, Any]) -> None:
            seen.update(header)
            bar.append(
                stack.enter_context(progress_mod.bar(header["counts"]["facts"], "exporting"))
            )

        if output_file is None:
            stack.enter_context(_stdout_pipe())
        memory.export(
            sys.stdout if output_file is None else output_file,
            bank=name,
            with_vectors=with_vectors,
            on_header=on_header,
            progress=lambda n: bar[0](n) if bar and bar[0] else None,
        )
    memory.close()
    c = seen["counts"]
    where = f" to {output_file}" if output_file else ""
    info(
        f"exported bank {name!r}{where}: {c['facts']} facts, {c['documents']} documents, "
        f"{c['chunks']} chunks, {c['entities']} entities, {c['links']} links"
        + (", with vectors" if seen["vectors"] else "")
    )


def import_bank(
    file: Annotated[str, typer.Argument(help="An export file, or - for stdin.")],
    into: Annotated[
        str | None,
        typer.Option(
            "--into",
            help="Bank to create (default: mem --bank if given, else the bank named in the file).",
        ),
    ] = None,
    reembed: Annotated[
        bool, typer.Option("--reembed", help="Compute vectors again (do not use the file's).")
    ] = False,
    embedder: Annotated[
        str | None,
        typer.Option("--embedder", help="Model for the bank (default: the one the file names)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    from_format: Annotated[
        ImportFormat | None,  # type: ignore[valid-type]
        typer.Option(
            "--from",
            help="Read another tool's export into the bank (--into, else mem --bank), a "
            "conversation per document: chatgpt, claude, mem0, mcp-memory or jsonl.",
        ),
    ] = None,
) -> None:
    """Import a `mem export` file into a new bank, in one transaction (all or nothing); or,
    with --from, another tool's history into a bank (unchanged conversations skipped)."""
    if from_format is not None:
        if reembed:
            fail("--reembed is for `mem export` files, not with --from", 2)
        _import_from(file, from_format.value, into, embedder, as_json)
        return
    from memcli import exchange
    from memcli import progress as progress_mod

    if file == "-":
        from memcli.cliutil import STDIN_CLOSED

        if state.stdin_closed:
            fail(STDIN_CLOSED, 2)
        fh = sys.stdin.buffer
        name = "stdin"
    else:
        from memcli.paths import is_store_file

        if is_store_file(file, state.db):
            fail(f"{file} is the store itself (or its log), not a `mem export` file")
        try:
            fh = open(file, "rb")
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror or exc}")
        name = file
    # `mem --bank B import` (or MEM_BANK, the config) names the bank too; only a bank nobody
    # chose falls back to the one the file names.
    source = getattr(state, "sources", {}).get("bank")
    chosen = source is not None and getattr(source, "source", "default") != "default"
    target = into or (state.bank if chosen or state.bank != "default" else None)
    bars = ExitStack()
    advance: Any = None
    header_seen: dict[str, Any] = {}

    def on_stage(label: str) -> None:
        """A bar of the file's facts for each pass: "embedding" (a file without vectors),
        then "importing"."""
        nonlocal advance
        bars.close()
        total = int(header_seen["counts"].get("facts") or 0)
        advance = bars.enter_context(progress_mod.bar(total, label))

    memory = cli_memory(embedder)
    # The bar is closed before an error is printed, so the message starts its own line.
    with errors():
        try:
            report = memory.import_(
                exchange.utf8_lines(fh, name),
                name=name,
                into=target,
                reembed=reembed,
                progress=lambda n: advance(n) if advance else None,
                on_header=header_seen.update,
                on_stage=on_stage,
            )
        finally:
            bars.close()
            if fh is not sys.stdin.buffer:
                fh.close()
    memory.close()
    if as_json:
        echo_after_commit(_dumps(report.to_json()), f"imported bank {report.bank!r}")
    c = report.counts
    renumbered = f"; new ids for {', '.join(report.renumbered)}" if report.renumbered else ""
    embedded = f", {report.embedded} embedded" if report.embedded else ", vectors from the file"
    info(
        f"imported bank {report.bank!r}: {c['facts']} facts{embedded}, {c['documents']} "
        f"documents, {c['chunks']} chunks, {c['entities']} entities, {c['links']} links in "
        f"{report.seconds:.1f}s{renumbered}"
    )


def _import_from(
    file: str, fmt: str, into: str | None, embedder: str | None, as_json: bool
) -> None:
    """`mem import --from FORMAT FILE`: the file is read and checked whole before the store
    is opened (a malformed file writes nothing); then its changed conversations are
    retained (memcli/sources/documents.py)."""
    from memcli import progress as progress_mod
    from memcli.sources.importers import read_import

    bank = into or state.bank
    if file == "-":
        from memcli.cliutil import STDIN_CLOSED

        if state.stdin_closed:
            fail(STDIN_CLOSED, 2)
        data, name = sys.stdin.buffer.read(), "stdin"
    else:
        from memcli.paths import is_store_file

        if is_store_file(file, state.db):
            fail(f"{file} is the store itself (or its log), not an export to read")
        try:
            data, name = Path(file).read_bytes(), file
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror or exc}")
    memory = cli_memory(embedder)
    bars = ExitStack()
    advance: Any = None

    def on_total(todo: int) -> None:
        nonlocal advance
        advance = bars.enter_context(progress_mod.bar(todo, "importing"))

    with errors(renames={"bank": "--into"}), bars:
        memory.require_bank_name(bank)
        docs = read_import(data, name, fmt)
        if not docs:
            fail(f"{name} holds no messages or memories to import")
        from memcli.retain import RetainError

        try:
            report = memory.retain_documents(
                docs,
                bank=bank,
                progress=lambda n: advance(n) if advance else None,
                on_total=on_total,
            )
        except RetainError as exc:  # an item of one conversation: named with its file
            raise RetainError(f"{name}: {exc}") from None
    memory.close()
    r = report.retained
    if as_json:
        typer.echo(
            _dumps(
                {
                    "bank": bank,
                    "added": report.added,
                    "replaced": report.replaced,
                    "unchanged": len(report.unchanged),
                    "facts": r.facts,
                    "interrupted": report.interrupted,
                }
            )
        )
    line = (
        f"imported {name} into bank {bank!r}: {len(report.added)} documents added, "
        f"{len(report.replaced)} replaced, {len(report.unchanged)} unchanged; {r.items} items, "
        f"{r.facts} facts, {r.entities} new entities in {report.seconds:.1f}s"
    )
    if report.interrupted:
        info("interrupted: kept " + line)
        exit_interrupted()
    info(line)


# --------------------------------------------------------------------------------------------


def reembed(
    embedder: Annotated[
        str | None,
        typer.Option("--embedder", help="GGUF embedding model (default: $MEM_EMBEDDER or MiniLM)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Re-embed every fact of the bank with another model, in resumable batches."""
    from memcli import progress as progress_mod

    bars = ExitStack()
    advance: Any = None

    def on_total(total: int, staged: int) -> None:
        nonlocal advance
        if staged:
            info(f"resuming: {staged} of {total} facts were re-embedded by an earlier run")
        advance = bars.enter_context(progress_mod.bar(total - staged, "re-embedding"))

    memory = cli_memory()
    # The bar is closed before an error is printed, so the message starts its own line.
    with errors(), bars:
        report = memory.reembed(
            embedder,
            progress=lambda n: advance(n) if advance else None,
            on_total=on_total,
        )
    memory.close()
    if as_json:
        echo_after_commit(_dumps(report.to_json()), f"re-embedded bank {report.bank!r}")
    if report.interrupted:
        done = report.resumed + report.embedded
        info(
            f"interrupted: {done} of {report.facts} facts re-embedded so far (kept); the bank "
            f"still uses its old vectors. Run the same `mem reembed` again to finish"
        )
        exit_interrupted()
    fp = f" ({report.fingerprint[:12]})" if report.fingerprint else ""
    info(
        f"re-embedded {report.facts} facts of bank {report.bank!r} with {report.embedder}{fp} "
        f"in {report.seconds:.1f}s"
    )


# --------------------------------------------------------------------------------------------


def banks(
    rename: Annotated[
        tuple[str, str] | None, typer.Option("--rename", help="Rename bank OLD to NEW.")
    ] = None,
    delete: Annotated[
        str | None, typer.Option("--delete", help="Delete a bank and all it holds.")
    ] = None,
    yes: YesOpt = False,
    output: FormatOpt = Format.text,
) -> None:
    """List the banks (facts, documents, embedder, dates), rename or delete one."""
    if rename and delete:
        fail("give --rename or --delete, not both", 2)
    memory = cli_memory()
    if rename:
        old, new = rename
        with errors(renames={"old": "--rename OLD", "new": "--rename NEW"}):
            memory.rename_bank(old, new)
        info(f"renamed bank {old!r} to {new!r}")
        return
    if delete:
        with errors(renames={"bank": "--delete"}):
            n = memory.bank_size(delete)
            _confirm(
                f"Delete bank {delete!r} and its {n} facts? This cannot be undone.",
                yes,
                f"refusing to delete bank {delete!r} ({n} facts)",
            )
            counts = memory.delete_bank(delete)
        if output is Format.text:
            info(
                f"deleted bank {delete!r}: {counts['facts']} facts, {counts['documents']} "
                f"documents, {counts['entities']} entities, {counts['links']} links"
            )
        else:
            typer.echo(_dumps({"deleted": delete, "counts": counts}))
        return
    require_store(memory)
    with errors():
        rows = [b.to_json() for b in memory.banks()]
    memory.close()
    from memcli.display import memory_days

    spans = [memory_days(r) for r in rows]  # (which drops the rows' period flags)
    with _stdout_pipe():
        if output is Format.json:
            _write_lines([_dumps(rows)])
        elif output is Format.jsonl:
            _write_lines(_dumps(r) for r in rows)
        else:
            for r, days in zip(rows, spans):
                fp = f" ({r['embedder_fingerprint'][:12]})" if r["embedder_fingerprint"] else ""
                span = days if r["first"] else "-"
                note = f", re-embedding to {r['reembedding']}" if r["reembedding"] else ""
                typer.echo(
                    f"{r['bank']}: {r['facts']} facts, {r['documents']} documents, "
                    f"embedder {r['embedder'] or 'none'}{fp}, {span}{note}"
                )


def register(app: typer.Typer) -> None:
    app.command("list")(list_memories)
    app.command("show")(show)
    app.command("forget")(forget)
    app.command("correct")(correct)
    app.command("export")(export)
    app.command("import")(import_bank)
    app.command("reembed")(reembed)
    app.command("banks")(banks)
