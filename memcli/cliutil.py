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
