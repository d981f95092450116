"""What every `mem` command shares: the global options, opening the store, loading the
embedder, the one-line error exit and the budget choice.

Command modules (memcli/cli.py and memcli/commands/*) import from here, never from each
other. Only typer and the standard library at import time: the CLI imports this at start-up.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

# The enums every command's options take (defined once, memcli/enums.py; re-exported).
from memcli.enums import Budget as Budget
from memcli.enums import FactType as FactType
from memcli.enums import TagsMatch as TagsMatch

if TYPE_CHECKING:
    from memcli.memory import Memory


class State:
    """The global options (`mem --db D --bank B ...`), set by the app callback."""

    db: Path
    bank: str = "default"
    # memcli.config.Settings, read once per process; and every value resolved through
    # configured(), with its source, for --trace.
    settings: Any = None
    sources: dict[str, Any]
    # The global flags as given (None: not given), for commands that resolve settings
    # themselves (`mem config show`).
    flags: dict[str, Any]
    # Whether the caller closed stdin or stdout (`<&-`, `>&-`): Python leaves them None,
    # and main() puts the null device in their place (memcli/cli.py).
    stdin_closed: bool = False
    stdout_closed: bool = False

    def __init__(self) -> None:
        self.sources = {}
        self.flags = {}


state = State()

STDIN_CLOSED = "'-' reads stdin, which is closed: give a file instead"


def configured(name: str, flag: Any = None) -> Any:
    """The value of setting `name`: flag > MEM_<NAME> > config file > default (memcli/config.py).
    Remembered with its source for --trace; a bad value is a one-line error exit."""
    from memcli.config import ConfigError, Settings

    try:
        if state.settings is None:
            state.settings = Settings()
        setting = state.settings.resolve(name, flag)
    except ConfigError as exc:
        fail(str(exc))
    state.sources[name] = setting
    return setting.value


def info(message: str) -> None:
    """A message for the user (stderr: stdout is for results)."""
    typer.echo(message, err=True)


_interrupt_reported = False


def exit_interrupted() -> NoReturn:
    """End a command that has said what its Ctrl-C kept (exit 130, no second message)."""
    global _interrupt_reported
    _interrupt_reported = True
    raise typer.Exit(130)


def interrupt_reported() -> bool:
    return _interrupt_reported


# How the CLI names the library's arguments in its messages (MemError.field and the
# "{name}" mentions): its flags. A command whose flag differs says so (forget's --before).
FLAGS = {
    "append": "--append",
    "arms": "--arms",
    "as_of": "--as-of",
    "at": "--at",
    "bank": "--bank",
    "before": "--before",
    "budget": "--budget",
    "context": "--context",
    "document_id": "--document",
    "embedder": "--embedder",
    "fact_id": "FACT_ID",
    "ids": "ids",
    "include_invalid": "--include-invalid",
    "into": "--into",
    "items": "--jsonl",
    "limit": "--limit",
    "max_chunk_tokens": "--max-chunk-tokens",
    "max_tokens": "--max-tokens",
    "min_score": "--min-score",
    "now": "--now",
    "offset": "--offset",
    "query": "--query",
    "reembed": "--reembed",
    "since": "--since",
    "source_id": "--source-id",
    "supersedes": "--supersedes",
    "tags": "--tag",
    "tags_match": "--tags-match",
    "text": "TEXT",
    "type": "--type",
    "types": "--type",
    "until": "--until",
}


def fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr and a non-zero exit."""
    typer.echo(f"mem: error: {message}", err=True)
    raise typer.Exit(code)


def flag_of(field: str, renames: dict[str, str] | None = None) -> str:
    """The CLI's name for a library argument."""
    if renames and field in renames:
        return renames[field]
    return FLAGS.get(field, field)


def fail_error(exc: Exception, renames: dict[str, str] | None = None) -> NoReturn:
    """A library error as `mem: error: ...`: its fields named as flags, exit 2 for a usage
    error and 1 for the rest."""
    from memcli.errors import MemError

    if isinstance(exc, MemError):
        fail(exc.describe(lambda field: flag_of(field, renames)), 2 if exc.usage else 1)
    fail(str(exc))


@contextmanager
def errors(renames: dict[str, str] | None = None) -> Iterator[None]:
    """The library's errors as one-line exits (see fail_error)."""
    from memcli.errors import MemError

    try:
        yield
    except MemError as exc:
        fail_error(exc, renames)


def require_store(memory: Memory) -> None:
    """A command whose answer from a store not made yet would be "nothing" (recall, list,
    banks) says so instead: at a terminal, that is a mistyped --db more often than not."""
    if not memory.exists():
        fail(f"no mem store at {memory.db} (run `mem retain` first)")


def memory(embedder: str | None = None, reranker: str | None = None) -> Memory:
    """The Memory of this command line: --db, --bank and the settings (flag > MEM_* > config
    file > default); --embedder and --reranker where a command has them."""
    from memcli.memory import Memory

    with errors():
        return Memory(
            state.db,
            state.bank,
            embedder=configured("embedder", embedder),
            reranker=reranker,
            budget=configured("budget"),
            max_tokens=configured("max_tokens"),
        )


def echo_after_commit(text: str, done: str) -> None:
    """Print a write command's result once its write has committed. A stdout that cannot
    take it (a full disk, /dev/full) is an error that says the write was made, so a retry
    does not store it twice at a new time; a reader that went away is not (EPIPE ends the
    run quietly, as for every command)."""
    import sys

    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        try:  # what could not be written must not be tried again at exit
            sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        except OSError:
            pass
        fail(
            f"{done}, but the output could not be written ({exc.strerror or exc}); it is "
            "stored: do not run it again"
        )


def describe_unexpected(exc: BaseException) -> str:
    """One line for an error no command anticipated: what SQLite or the OS said, plainly."""
    import sys

    name = type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        where = f" {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    store = sys.modules.get("memcli.store")  # a database error comes from a loaded store
    if store is not None and store.is_database_error(exc):
        return f"database error: {exc}"
    text = " ".join(str(exc).split()) or "no details"
    return f"unexpected {name}: {text} (run with MEM_DEBUG=1 for a traceback)"
