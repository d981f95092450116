"""What every `mem` command shares: the global options, opening the store, loading the
embedder, the one-line error exit and the budget choice.

Command modules (memcli/cli.py and memcli/commands/*) import from here, never from each
other. Only typer and the standard library at import time: the CLI imports this at start-up.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from memcli.models.embedder import Embedder
    from memcli.store import Store


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

    def __init__(self) -> None:
        self.sources = {}
        self.flags = {}


state = State()


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


class TagsMatch(str, Enum):
    """How --tag filters (recall, list, forget): see memcli/store/search.py."""

    any = "any"
    all = "all"
    any_strict = "any_strict"
    all_strict = "all_strict"
    exact = "exact"


class Budget(str, Enum):
    low = "low"
    mid = "mid"
    high = "high"


def fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr and a non-zero exit."""
    typer.echo(f"mem: error: {message}", err=True)
    raise typer.Exit(code)


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
    name = type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        where = f" {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    module = type(exc).__module__
    if module == "apsw" or name.endswith("Error") and "apsw" in module:
        return f"database error: {exc}"
    text = " ".join(str(exc).split()) or "no details"
    return f"unexpected {name}: {text} (run with MEM_DEBUG=1 for a traceback)"


def open_store(create: bool, readonly: bool = False) -> Store:
    """The store at --db, or a one-line error exit (not a store, locked, unreadable...)."""
    from memcli.store import StoreError
    from memcli.store.location import open_store as open_location
    from memcli.store.location import shown

    try:
        return open_location(state.db, create=create, readonly=readonly)
    except StoreError as exc:
        fail(str(exc))
    except Exception as exc:  # apsw errors on unreadable files, permissions, ...
        fail(f"cannot open {shown(state.db)}: {exc}")


def load_bank_embedder_or_fail(
    store: Store | None, bank: str, flag: str | None = None, texts: list[str] | None = None
) -> Embedder:
    """The embedder for a bank: --embedder (flag) > the `embedder` setting (MEM_EMBEDDER, the
    config file) > the model the bank was made with > for a new bank, the one its first texts
    suit (memcli/models/choice.py: mostly CJK -> multilingual e5). store None: no store yet,
    so a new bank. One-line error exit."""
    from memcli.models import ModelError, choice
    from memcli.models.embedder import load_embedder

    override = configured("embedder", flag)
    bank_id = store.banks.bank_id(bank) if store is not None else None
    recorded = store.vectors.bank_embedder(bank_id)[0] if bank_id is not None else None
    try:
        return load_embedder(choice.for_bank(recorded, override, texts, bank=bank).spec)
    except ModelError as exc:
        fail(str(exc))


def load_embedder_or_fail(name: str | None = None) -> Embedder:
    """The embedder named (or the `embedder` setting: $MEM_EMBEDDER, the config file; else
    the default), or a one-line error exit."""
    from memcli.models import ModelError
    from memcli.models.embedder import load_embedder

    try:
        return load_embedder(name or configured("embedder"))
    except ModelError as exc:
        fail(str(exc))
