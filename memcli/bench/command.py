"""``mem bench``: run the real retain and recall pipeline on a benchmark and report the losses.

This module is imported when the CLI starts, so at module level it may only import typer and
the standard library: ``mem --help`` must not pull in numpy, SQLite extensions or a model. The
runner, the readers and the models are imported inside :func:`bench`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from memcli.cliutil import Budget, fail

__all__ = ["BenchFormat", "bench"]

ARM_NAMES = ("semantic", "keyword", "graph", "temporal", "document")


class BenchFormat(str, Enum):
    locomo = "locomo"
    longmemeval = "longmemeval"
    lme = "lme"
    jsonl = "jsonl"


def _guess_format(path: Path) -> str | None:
    """Infer the format from the file name so the common datasets need no --format."""
    name = path.name.lower()
    if name.endswith(".jsonl"):
        # LongMemEval with one question a line (the S dev sample) is lme; else generic.
        return "lme" if "longmemeval" in name else "jsonl"
    if "longmemeval" in name:
        return "longmemeval"
    if "locomo" in name:
        return "locomo"
    return None


def _parse_ks(text: str) -> tuple[int, ...]:
    """ "1,5,10" -> (1, 5, 10), sorted and deduplicated; every k must be a positive integer."""
    try:
        ks = sorted({int(part) for part in text.replace(" ", "").split(",") if part})
    except ValueError:
        fail(f"--k must be comma-separated positive integers, got {text!r}", 2)
    if not ks or ks[0] < 1:
        fail(f"--k must be comma-separated positive integers, got {text!r}", 2)
    return tuple(ks)


def _parse_arms(text: str) -> tuple[str, ...]:
    arms = tuple(dict.fromkeys(a.strip() for a in text.split(",") if a.strip()))
    unknown = [a for a in arms if a not in ARM_NAMES]
    if unknown or not arms:
        bad = unknown[0] if unknown else text
        fail(f"unknown arm {bad!r} (use {', '.join(ARM_NAMES)})", 2)
    return arms


def _parse_settings(values: list[str] | None) -> dict[str, Any]:
    """KEY=VALUE pairs; VALUE is read as JSON (numbers, objects) and else kept as a string."""
    out: dict[str, Any] = {}
    for value in values or []:
        key, sep, raw = value.partition("=")
        if not sep or not key.strip():
            fail(f"--setting must be KEY=VALUE, got {value!r}", 2)
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


def _parse_categories(values: list[str] | None) -> tuple[str, ...] | None:
    """--category is repeatable and each value may itself be a comma list."""
    if not values:
        return None
    cats = [c.strip() for value in values for c in value.split(",") if c.strip()]
    return tuple(dict.fromkeys(cats)) or None


class _Progress:
    """Progress on stderr: a redrawn bar on a terminal, else a plain line every 30 s.

    A redirected stderr (CI logs, nohup) must not fill up with carriage returns, so only a
    few timestamped lines are written there.
    """

    def __init__(self, total: int | None, stream: Any = None) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.last_line = 0.0
        self.last_draw = 0.0
        self.drawn = False

    def __call__(self, event: Any) -> None:
        now = time.monotonic()
        done = event.questions_done
        total = self.total if self.total is not None else event.questions_total
        elapsed = _clock(event.elapsed)
        if event.phase == "done":
            if self.tty and self.drawn:
                self.stream.write("\r\x1b[K")
            elif not self.tty:
                self.stream.write(
                    f"mem bench: done, {done} questions, {event.cases_done} cases, {elapsed}\n"
                )
            self.stream.flush()
            return
        if self.tty:
            if now - self.last_draw < 0.1 and event.phase == "recall":
                return
            self.last_draw = now
            if total:
                filled = int(30 * min(done / total, 1.0))
                bar = "#" * filled + "." * (30 - filled)
                head = f"[{bar}] {done}/{total} questions"
            else:
                head = f"{done} questions"
            what = "retaining" if event.phase == "retain" else "recalling"
            self.stream.write(f"\r\x1b[K{head}  {what} {event.case_id}  {elapsed}")
            self.stream.flush()
            self.drawn = True
        elif event.phase == "retain" and now - self.last_line >= 30.0:
            self.last_line = now
            of = f"/{total}" if total else ""
            self.stream.write(
                f"mem bench: {done}{of} questions, {event.cases_done} cases, {elapsed}\n"
            )
            self.stream.flush()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def bench(
    dataset: Annotated[
        Path,
        typer.Option("--dataset", help="Benchmark file (LoCoMo JSON, LongMemEval JSON or JSONL)."),
    ],
    fmt: Annotated[
        BenchFormat | None,
        typer.Option(
            "--format", help="Dataset format. Default: guessed from the file name (.jsonl, ...)."
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Stop after N asked questions (after skips and --category; a LongMemEval "
            "case is one question).",
        ),
    ] = None,
    category: Annotated[
        list[str] | None,
        typer.Option("--category", help="Only these categories (repeatable or comma list)."),
    ] = None,
    k: Annotated[
        str | None,
        typer.Option(
            "--k",
            help="Cut-offs, e.g. 1,5,10. Default: 1,3,5,10,30,50 for LongMemEval, else "
            "1,5,10,20,50.",
        ),
    ] = None,
    budget: Annotated[
        Budget, typer.Option(help="Candidates per arm: low 100, mid 300, high 1000.")
    ] = Budget.mid,
    max_tokens: Annotated[int, typer.Option(min=1, help="Token budget of each recall.")] = 4096,
    arms: Annotated[
        str | None,
        typer.Option(help="Comma-separated arms to run (ablation). Default: all four."),
    ] = None,
    no_rerank: Annotated[bool, typer.Option("--no-rerank", help="Do not rerank.")] = False,
    reranker: Annotated[
        str | None, typer.Option(help="GGUF cross-encoder (RANK pooling); env MEM_RERANKER.")
    ] = None,
    no_boosts: Annotated[
        bool, typer.Option("--no-boosts", help="No recency/temporal/proof/speaker boosts.")
    ] = False,
    setting: Annotated[
        list[str] | None,
        typer.Option(
            "--setting",
            help="Override a recall setting for an ablation, KEY=VALUE with VALUE as JSON "
            "(repeatable), e.g. --setting fusion=rrf.",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="Run every case in this store (a postgresql:// URL), in one bank emptied "
            "before and after each case. Default: a new SQLite file per case.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the full report (with per-question rows) as JSON."),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Exit 1 when the dataset is missing or no question could be scored."
        ),
    ] = False,
    stores: Annotated[
        Path | None,
        typer.Option(
            "--stores",
            help="Keep each case's store in this folder and reuse it in later runs (for "
            "recall-only ablations). Another embedder, schema, version, retain settings or "
            "data makes a new one; clear the folder after changing retain code.",
        ),
    ] = None,
    vector_cache: Annotated[
        bool,
        typer.Option(
            help="Keep the benchmark's vectors on disk (user cache folder, keyed by model and "
            "text), so a repeated run embeds only new text."
        ),
    ] = True,
) -> None:
    """Benchmark recall on a dataset: where gold evidence is lost (retrieval, ranking, budget).

    Each case (LoCoMo conversation, LongMemEval question, JSONL case) gets a fresh temp store.

    Gold is classed as never a candidate, ranked out of the top 10, cut by the budget, or hit.

    LoCoMo: category 5 and gold-less questions skipped; asked at the last session's date.

    LongMemEval: user turns only, abstentions skipped, item- and session-level scores.

    lme (LongMemEval S, one question a line): a store per question, each session a document,
    session-level scores per question type beside the raw floor (one MiniLM vector per
    session, cosine only); abstention questions are asked for the relevance floor only.
    """
    if not dataset.exists():
        message = f"mem bench: skip: dataset not found: {dataset}"
        typer.echo(message, err=True)
        raise typer.Exit(1 if strict else 0)
    if dataset.is_dir():
        fail(f"--dataset is a directory: {dataset}", 2)
    fmt_name = fmt.value if fmt is not None else _guess_format(dataset)
    if fmt_name is None:
        fail(f"cannot tell the format of {dataset.name}; give --format", 2)
    categories = _parse_categories(category)
    arm_list = _parse_arms(arms) if arms else ARM_NAMES
    overrides = _parse_settings(setting)

    from memcli.bench.datasets import iter_dataset
    from memcli.bench.report import format_table, to_json
    from memcli.bench.runner import (
        BenchOptions,
        default_ks,
        planned_questions,
        recall_settings,
        run_bench,
    )
    from memcli.models import ModelError
    from memcli.recall import RecallError

    ks = _parse_ks(k) if k else default_ks(fmt_name)
    try:
        recall_settings(overrides)
    except (TypeError, ValueError) as exc:
        fail(f"--setting: {exc}", 2)
    reranker_path = None if no_rerank else (reranker or os.environ.get("MEM_RERANKER") or None)
    options = BenchOptions(
        dataset=str(dataset),
        format=fmt_name,
        limit=limit,
        categories=categories,
        ks=ks,
        budget=budget.value,
        max_tokens=max_tokens,
        arms=arm_list,
        rerank=not no_rerank,
        boosts=not no_boosts,
        reranker=reranker_path,
        settings=overrides,
        stores=str(stores) if stores is not None else None,
        store_url=store,
    )
    if store is not None:
        from memcli.storeurl import location_problem

        problem = location_problem(store)
        if problem:
            fail(f"--store: {problem}", 2)
    if out is not None and (not out.name or str(out) == "-" or out.is_dir()):
        # Found now, not after a run of minutes: the report needs a file to go to (the
        # table is what stdout gets).
        fail(f"--out {str(out)!r}: give the path of a file to write the report to", 2)
    try:
        cases = iter_dataset(dataset, fmt_name)
        total: int | None = None
        if fmt_name not in ("longmemeval", "lme"):
            # Formats read whole anyway: count what will be asked, so the bar has an end.
            cases = list(cases)
            total = planned_questions(cases, options)
        elif limit is not None:
            total = limit
        elif fmt_name == "lme":
            with dataset.open("rb") as fh:  # one question a line: the bar's end is cheap
                total = sum(1 for line in fh if line.strip())
    except (OSError, ValueError) as exc:
        message = str(exc)
        # The readers name the file themselves (for errors found midway through a stream).
        fail(message if message.startswith(f"{dataset}: ") else f"cannot read {dataset}: {exc}")

    try:
        from memcli.models.load import load_embedder

        spec = os.environ.get("MEM_EMBEDDER") or None
        if spec is None:
            from memcli.models.choice import DEFAULT_NAME

            # As retain chooses for a new bank.
            spec = DEFAULT_NAME
        embedder = load_embedder(spec)
        # The protocol's floor is MiniLM's whatever the pipeline embeds with.
        floor_embedder = load_embedder("minilm") if options.wants_raw_floor() else None
        if vector_cache:
            from memcli.store.vector_cache import cached

            embedder = cached(embedder)
            floor_embedder = cached(floor_embedder) if floor_embedder is not None else None
        cross = None
        if reranker_path:
            from memcli.models.reranker import load_reranker

            cross = load_reranker(reranker_path)
    except ModelError as exc:
        fail(str(exc))

    # A benchmark's times are its conversations' wall clock, stored as they are written:
    # read in UTC, relative dates ("yesterday") fall on the days the dataset means, and the
    # scores do not depend on the zone of the machine that runs the benchmark.
    user_tz = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    try:
        summary = run_bench(
            cases,
            options,
            embedder=embedder,
            reranker=cross,
            progress=_Progress(total),
            floor_embedder=floor_embedder,
        )
    except RecallError as exc:
        fail(str(exc), 2)
    except ValueError as exc:  # a streamed dataset can turn out malformed midway
        fail(f"{dataset}: {exc}")
    finally:
        if user_tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = user_tz

    typer.echo(format_table(summary), nl=False)
    if out is not None:
        try:
            from memcli.paths import write_atomically

            # Beside the old report until the new one is whole: a failed write keeps it.
            report = to_json(summary).encode("utf-8")
            write_atomically(out, lambda tmp: tmp.write_bytes(report))
        except OSError as exc:
            fail(f"cannot write {out}: {exc.strerror or exc}")
        typer.echo(f"mem bench: report written to {out}", err=True)
    scored = sum(v for key, v in summary["counts"].items() if key.startswith("scored:"))
    if scored == 0:
        typer.echo("mem bench: no question could be scored", err=True)
        if strict:
            raise typer.Exit(1)
