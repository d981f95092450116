"""`mem list`, `show`, `forget`, `correct`, `export`, `import`, `reembed` and `banks`: parse,
call memcli.lifecycle / memcli.exchange, print. Results on stdout (text, json or jsonl),
messages and progress on stderr; anything that deletes asks first at a terminal and
refuses without --yes elsewhere."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from memcli.cliutil import (
    TagsMatch,
    echo_after_commit,
    exit_interrupted,
    fail,
    info,
    load_embedder_or_fail,
    open_store,
    state,
)
from memcli.display import one_line, terminal_safe


class Format(str, Enum):
    text = "text"
    json = "json"
    jsonl = "jsonl"


FormatOpt = Annotated[Format, typer.Option("--format", help="text, json or jsonl.")]
TagOpt = Annotated[list[str] | None, typer.Option("--tag", help="Tag (repeatable).")]
TagsMatchOpt = Annotated[TagsMatch, typer.Option(help="How --tag selects.")]
TypeOpt = Annotated[
    list[str] | None, typer.Option("--type", help="world | experience | observation (repeatable).")
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def _when(value: str | None, option: str):
    if value is None:
        return None
    from memcli.timeparse import parse_when

    try:
        return parse_when(value)
    except ValueError as exc:
        fail(f"{option}: {exc}", 2)


@contextmanager
def _errors() -> Iterator[None]:
    """The library's one-line errors as `mem: error:` exits."""
    from memcli.lifecycle import LifecycleError, OptionError
    from memcli.models import ModelError
    from memcli.retain import RetainError
    from memcli.store import StoreError

    try:
        yield
    except OptionError as exc:
        fail(str(exc), 2)
    except (LifecycleError, StoreError, RetainError, ModelError) as exc:
        fail(str(exc))


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


def _export_target(output_file: Path, store_path: Path) -> Path:
    """Where an export goes: a symlink's target (the link stays). Refused (one-line error)
    for the store itself or its -wal/-shm/-journal, and for any other SQLite file: renaming
    the export over it would destroy a database."""
    from memcli.store import is_sqlite_file

    if not output_file.name:  # '' (typer makes it "."), ".", "/": no file to write
        fail(f"-o {str(output_file)!r} is not a file name (give a file, or - for stdout)", 2)
    from memcli.paths import STORE_SIBLINGS, is_store_file

    target = output_file.resolve()
    # (A store on a server, store_path its URL, has no file here to be written over.)
    if isinstance(store_path, Path):
        store = store_path.resolve()
        if target in {store, *(Path(f"{store}{end}") for end in STORE_SIBLINGS)} or (
            is_store_file(target, store)
        ):
            fail(f"refusing to export into the store's own file {output_file}")
    if is_sqlite_file(target):
        fail(f"refusing to overwrite {output_file}: it is an SQLite database")
    return target


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


def _selection(**kw: Any):
    from memcli.lifecycle import Selection

    types = kw.pop("types", None)
    tags = kw.pop("tags", None)
    return Selection(
        types=tuple(types) if types else None, tags=tuple(tags) if tags else None, **kw
    )


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
    from memcli import lifecycle

    sel = _selection(
        document=document,
        source_id=source_id,
        tags=tag,
        tags_match=tags_match.value,
        types=fact_type,
        context=context,
        since=_when(since, "--since"),
        until=_when(until, "--until"),
        valid_only=not include_invalid,
        as_of=_when(as_of, "--as-of"),
    )
    store = open_store(create=False, readonly=True)
    try:
        with _errors(), _stdout_pipe(), store.snapshot():
            facts = lifecycle.iter_facts(store, state.bank, sel, limit=limit, offset=offset)
            if output is Format.text:
                _write_lines(_fact_line(f) for f in facts)
            elif output is Format.jsonl:
                _write_lines(_dumps(lifecycle.fact_json(f)) for f in facts)
            else:
                _write_lines(_json_array(lifecycle.fact_json(f) for f in facts))
    finally:
        store.close()


def show(
    fact_ids: Annotated[list[int], typer.Argument(help="Fact ids.", show_default=False)],
    output: FormatOpt = Format.text,
) -> None:
    """Show memories whole: times, validity, entities, links, correction history."""
    from memcli import lifecycle

    store = open_store(create=False, readonly=True)
    try:
        with _errors(), store.snapshot():
            shown = lifecycle.show(store, state.bank, fact_ids)
    finally:
        store.close()
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
    from memcli import lifecycle
    from memcli.cliutil import load_bank_embedder_or_fail

    sel = _selection(
        ids=list(fact_ids) if fact_ids else None,
        source_id=source_id,
        document=document,
        tags=tag,
        tags_match=tags_match.value,
        types=fact_type,
        context=context,
        until=_when(before, "--before"),
        since=_when(since, "--since"),
        query=query,
        query_limit=limit,
        valid_only=False,
    )
    store = open_store(create=False)
    try:
        with _errors():
            plan = lifecycle.plan_forget(
                store,
                state.bank,
                sel,
                embedder=lambda: load_bank_embedder_or_fail(store, state.bank),
            )
            n = len(plan.fact_ids)
            if n == 0 and not dry_run and output is not Format.text:
                typer.echo(_dumps(lifecycle.forget_report(plan, False, None)))
            elif dry_run or n == 0:
                _print_plan(plan, output, dry_run)
            if n == 0:
                info("no fact matches; nothing forgotten")
            if dry_run or n == 0:
                return
            if not yes and sys.stdin.isatty():
                # What a yes would forget, before the question (on stderr, with it).
                _print_plan(plan, Format.text, dry_run=False, to_stderr=True)
            _confirm(
                f"Forget {n} facts from bank {state.bank!r}? This cannot be undone.",
                yes,
                f"refusing to forget {n} facts",
            )
            counts = lifecycle.forget(store, plan)
    finally:
        store.close()
    if output is Format.text:
        info(
            f"forgot {counts['facts']} facts ({counts['links']} links, {counts['entities']} "
            f"entities, {counts['chunks']} chunks, {counts['documents']} documents)"
            + (f"; {counts['reopened']} corrected facts valid again" if counts["reopened"] else "")
        )
    else:
        echo_after_commit(
            _dumps({"forgotten": plan.fact_ids, "counts": counts}),
            f"forgot {len(plan.fact_ids)} fact{'s' if len(plan.fact_ids) != 1 else ''}",
        )


def _print_plan(plan: Any, output: Format, dry_run: bool, to_stderr: bool = False) -> None:
    from memcli import lifecycle

    if output is not Format.text:
        typer.echo(_dumps(lifecycle.forget_report(plan, True, None)))
        return
    for f in plan.preview:
        typer.echo(_fact_line(f), err=to_stderr)
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
    from memcli import lifecycle
    from memcli.cliutil import load_bank_embedder_or_fail
    from memcli.retain import Retainer

    when = _when(at, "--at")
    from memcli.clock import utcnow

    if when is not None and when > utcnow():
        # A correction closes the old fact at its time: one in the future would leave both
        # current until then (a plan to change is a new memory, not a correction).
        fail(f"--at {at} is in the future: a correction is made now or was made earlier", 2)
    store = open_store(create=False)
    try:
        with _errors():
            old = lifecycle.current_fact(store, state.bank, fact_id)
            item = lifecycle.correction_item(store, old, " ".join(text), context)
            model = load_bank_embedder_or_fail(store, state.bank)
            retainer = Retainer(store, state.bank, model, now=when)
            _, new_ids = lifecycle.retain_superseding(store, old, retainer, [item])
    finally:
        store.close()
    from memcli.clock import local_text
    from memcli.store import iso

    if output is Format.text:
        at = local_text(retainer.now)
        info(f"fact {fact_id} corrected by {', '.join(map(str, new_ids))} at {at}")
    else:
        echo_after_commit(
            _dumps({"corrected": fact_id, "by": new_ids, "at": iso(retainer.now)}),
            f"fact {fact_id} corrected by {', '.join(map(str, new_ids))}",
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
    from memcli import cli, exchange
    from memcli import progress as progress_mod

    name = bank or state.bank
    store = open_store(create=False, readonly=True)
    lines: Any = None
    try:
        with _errors():
            header, lines = exchange.export_lines(store, name, with_vectors=with_vectors)
            total = header["counts"]["facts"]
            if output_file is not None and str(output_file) == "-":
                output_file = None  # as `mem import -` reads stdin
            target = None if output_file is None else _export_target(output_file, store.path)
            if target is None and cli.stdout_closed():
                # `>&-`: the export would go nowhere, and its summary said "exported".
                fail("stdout is closed: nothing would receive the export; give -o FILE")
            if target is None:
                with _stdout_pipe(), progress_mod.bar(total, "exporting") as advance:
                    _write_export(sys.stdout, lines, advance)
            elif not target.is_file() and target.exists():
                # A FIFO, a device, /dev/stdout: written into, never renamed over.
                try:
                    with open(target, "w", encoding="utf-8") as fh:
                        with progress_mod.bar(total, "exporting") as advance:
                            _write_export(fh, lines, advance)
                except OSError as exc:
                    fail(f"cannot write {output_file}: {exc.strerror or exc}")
            else:
                from memcli.paths import write_atomically

                def write(tmp: Path) -> None:
                    with open(tmp, "w", encoding="utf-8") as fh:
                        with progress_mod.bar(total, "exporting") as advance:
                            _write_export(fh, lines, advance)

                try:
                    # Private as the store is: an export holds every memory.
                    write_atomically(target, write, mode=0o600, parents=False)
                except OSError as exc:
                    fail(f"cannot write {output_file}: {exc.strerror or exc}")
    finally:
        if lines is not None:
            lines.close()  # ends the read transaction even when the reader stopped early
        store.close()
    c = header["counts"]
    where = f" to {output_file}" if output_file else ""
    info(
        f"exported bank {name!r}{where}: {c['facts']} facts, {c['documents']} documents, "
        f"{c['chunks']} chunks, {c['entities']} entities, {c['links']} links"
        + (", with vectors" if header["vectors"] else "")
    )


def _write_export(fh: Any, lines: Iterable[str], advance: Any) -> None:
    for line in lines:
        fh.write(line)
        fh.write("\n")
        if advance is not None and line.startswith('{"kind":"fact"'):
            advance(1)


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
) -> None:
    """Import a `mem export` file into a new bank, in one transaction (all or nothing)."""
    from memcli import exchange
    from memcli import progress as progress_mod
    from memcli.lifecycle import LifecycleError

    if file == "-":
        from memcli.cli import STDIN_CLOSED, stdin_closed

        if stdin_closed():
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
    bar_ctx: Any = None
    advance: Any = None
    header_seen: dict[str, Any] = {}

    def on_header(header: dict[str, Any]) -> None:
        header_seen.update(header)

    def on_stage(label: str) -> None:
        """A bar of the file's facts for each pass: "embedding" (a file without vectors),
        then "importing"."""
        nonlocal bar_ctx, advance
        if bar_ctx is not None:
            bar_ctx.__exit__(None, None, None)
            bar_ctx = advance = None
        bar_ctx = progress_mod.bar(int(header_seen["counts"].get("facts") or 0), label)
        advance = bar_ctx.__enter__()

    def bank_model() -> Any:
        """--embedder / MEM_EMBEDDER; else the model the file names, when mem has it (its
        vectors are used as they are); else, for vectors computed anew, the default."""
        from memcli.cliutil import configured
        from memcli.models import ModelError, choice
        from memcli.models.embedder import load_embedder

        override = configured("embedder", embedder)
        named = None if reembed else header_seen["bank"].get("embedder")
        bank_name = target or header_seen["bank"]["name"]
        # Errors are raised, not printed here: the progress bar is closed first (_errors).
        try:
            spec = choice.for_bank(named, override, bank=bank_name).spec
        except ModelError:
            if header_seen.get("vectors"):
                raise LifecycleError(
                    f"{name} holds vectors of {named}, a model file mem does not ship: "
                    "give it with --embedder PATH, or add --reembed to embed the facts "
                    "again with the current model"
                ) from None
            spec = choice.for_bank(None, override, bank=bank_name).spec
        return load_embedder(spec)

    def run(store: Any) -> Any:
        return exchange.import_lines(
            store,
            exchange.utf8_lines(fh, name),
            name=name,
            bank=target,
            embedder=bank_model,
            reembed=reembed,
            progress=lambda n: advance(n) if advance else None,
            on_header=on_header,
            on_stage=on_stage,
        )

    db = state.db  # a Path (~ expanded), or a postgresql:// StoreURL
    # The bar is closed before an error is printed, so the message starts its own line.
    with _errors():
        try:
            if isinstance(db, str) or os.path.lexists(db):  # a URL: its transaction is all
                store = open_store(create=True)
                try:
                    report = run(store)
                finally:
                    store.close()
            else:
                # No store yet: it appears only if the import succeeds (store/__init__.py).
                from memcli.store import fill_new_store

                report = fill_new_store(db, run)
        finally:
            if bar_ctx is not None:
                bar_ctx.__exit__(None, None, None)
            if fh is not sys.stdin.buffer:
                fh.close()
    if as_json:
        typer.echo(
            _dumps(
                {
                    "bank": report.bank,
                    "counts": report.counts,
                    "renumbered": report.renumbered,
                    "seconds": round(report.seconds, 3),
                }
            )
        )
    c = report.counts
    renumbered = f"; new ids for {', '.join(report.renumbered)}" if report.renumbered else ""
    embedded = f", {report.embedded} embedded" if report.embedded else ", vectors from the file"
    info(
        f"imported bank {report.bank!r}: {c['facts']} facts{embedded}, {c['documents']} "
        f"documents, {c['chunks']} chunks, {c['entities']} entities, {c['links']} links in "
        f"{report.seconds:.1f}s{renumbered}"
    )


# --------------------------------------------------------------------------------------------


def reembed(
    embedder: Annotated[
        str | None,
        typer.Option("--embedder", help="GGUF embedding model (default: $MEM_EMBEDDER or MiniLM)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Re-embed every fact of the bank with another model, in resumable batches."""
    from memcli import lifecycle
    from memcli import progress as progress_mod

    model = load_embedder_or_fail(embedder)
    store = open_store(create=False)
    totals: dict[str, int] = {}
    bar_ctx: Any = None
    advance: Any = None

    def on_total(total: int, staged: int) -> None:
        nonlocal bar_ctx, advance
        totals.update(total=total, staged=staged)
        if staged:
            info(f"resuming: {staged} of {total} facts were re-embedded by an earlier run")
        bar_ctx = progress_mod.bar(total - staged, "re-embedding")
        advance = bar_ctx.__enter__()

    # The bar is closed before an error is printed, so the message starts its own line.
    with _errors():
        try:
            report = lifecycle.reembed(
                store,
                state.bank,
                model,
                progress=lambda n: advance(n) if advance else None,
                on_total=on_total,
            )
        finally:
            if bar_ctx is not None:
                bar_ctx.__exit__(None, None, None)
            store.close()
    if as_json:
        echo_after_commit(_dumps(report.__dict__), f"imported bank {report.bank!r}")
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
    from memcli.store import check_bank_name

    if rename and delete:
        fail("give --rename or --delete, not both", 2)
    if rename:
        old, new = rename
        store = open_store(create=False)
        try:
            with _errors():
                check_bank_name(new)
                bank_id = store.banks.require_bank(old)
                with store.atomic():
                    store.banks.rename_bank(bank_id, new)
        finally:
            store.close()
        info(f"renamed bank {old!r} to {new!r}")
        return
    if delete:
        store = open_store(create=False)
        try:
            with _errors():
                bank_id = store.banks.require_bank(delete)
                n = store.facts.fact_count(bank_id)
                _confirm(
                    f"Delete bank {delete!r} and its {n} facts? This cannot be undone.",
                    yes,
                    f"refusing to delete bank {delete!r} ({n} facts)",
                )
                with store.atomic():
                    counts = store.banks.delete_bank(bank_id)
        finally:
            store.close()
        if output is Format.text:
            info(
                f"deleted bank {delete!r}: {counts['facts']} facts, {counts['documents']} "
                f"documents, {counts['entities']} entities, {counts['links']} links"
            )
        else:
            typer.echo(_dumps({"deleted": delete, "counts": counts}))
        return
    store = open_store(create=False, readonly=True)
    try:
        with _errors(), store.snapshot():
            rows = store.banks.bank_stats()
            for r in rows:
                bank_id = store.banks.bank_id(r["bank"])
                pending = store.reembed.reembed_state(bank_id) if bank_id is not None else None
                r["reembedding"] = pending["embedder"] if pending else None
    finally:
        store.close()
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
