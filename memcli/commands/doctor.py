"""`mem doctor`: check the store, the models and the tools mem needs (memcli/doctor.py)."""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated

import typer

from memcli.cliutil import configured, state


class DoctorFormat(str, Enum):
    text = "text"
    json = "json"


def doctor(
    output: Annotated[
        DoctorFormat, typer.Option("--format", help="text or json.")
    ] = DoctorFormat.text,
) -> None:
    """Check the store (quick_check, FTS5 index, facts = FTS rows = vectors, orphan rows),
    each bank's embedder, the model cache hashes, sqlite-vec and llama.cpp, and offline
    token counting. Prints every check; exits 1 when one fails.

    Example:  mem --db ~/notes/mem.db doctor --format json
    """
    from memcli import doctor as doctor_mod
    from memcli.cliutil import memory as cli_memory
    from memcli.render import use_color

    checks = cli_memory(reranker=configured("reranker")).doctor()
    failures = doctor_mod.failed(checks)
    if output is DoctorFormat.json:
        typer.echo(
            json.dumps(
                {
                    "ok": not failures,
                    "db": str(state.db),
                    "checks": [c.to_json() for c in checks],
                },
                ensure_ascii=False,
            )
        )
    else:
        color = use_color()
        styles = {"ok": "green", "warn": "yellow", "fail": "red", "skip": None}
        for c in checks:
            mark = f"{c.status.upper():<4}"
            if color and styles[c.status]:
                mark = typer.style(mark, fg=styles[c.status], bold=c.status == "fail")
            typer.echo(f"{mark}  {c.name}: {c.detail}")
        summary = (
            f"{len(failures)} of {len(checks)} checks failed"
            if failures
            else f"all {len(checks)} checks passed"
            + (
                f" ({sum(c.status == 'warn' for c in checks)} warnings)"
                if any(c.status == "warn" for c in checks)
                else ""
            )
        )
        typer.echo(summary, err=True)
    if failures:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
