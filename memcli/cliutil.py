"""What every `mem` command shares: the one-line error exit and the budget choice.

Only typer and the standard library here: the CLI imports this at start-up.
"""

from __future__ import annotations

from enum import Enum
from typing import NoReturn

import typer


class Budget(str, Enum):
    low = "low"
    mid = "mid"
    high = "high"


def fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr and a non-zero exit."""
    typer.echo(f"mem: error: {message}", err=True)
    raise typer.Exit(code)


def describe_unexpected(exc: BaseException) -> str:
    """One line for an error no command anticipated: what SQLite or the OS said, plainly."""
    name = type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        where = f" {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    module = type(exc).__module__
    if module == "apsw" or name.endswith("Error") and "apsw" in module:
        return f"database error: {exc}"
    text = " ".join(str(exc).split()) or "no details"
    return f"unexpected {name}: {text} (run with MEM_DEBUG=1 for a traceback)"
