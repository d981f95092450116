"""A progress bar on stderr for long imports, only when stderr is a terminal.

Uses rich (a declared dependency); NO_COLOR and TERM=dumb turn colour off (rich honours
NO_COLOR itself), and nothing is drawn when stderr is piped.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def wanted(total: int, threshold: int = 64) -> bool:
    return total > threshold and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


@contextmanager
def bar(total: int, label: str) -> Iterator[Callable[[int], None] | None]:
    """Yields an advance(n) callback, or None when no bar is drawn."""
    if not wanted(total):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    console = Console(
        file=sys.stderr,
        no_color=bool(os.environ.get("NO_COLOR")) or os.environ.get("TERM") == "dumb",
    )
    with Progress(
        f"[progress.description]{label}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.advance(task, n)
