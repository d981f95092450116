"""How `mem --help` reads: value names instead of Python types, and an example per command.

typer (0.29) shows each option's Python annotation (`--json <bool>`, `--tag <list[str]>`);
a user of a command-line tool wants the kind of value (`--tag TEXT`) and nothing after a
flag. `plain_value_names()` changes that for every command at once; `add_examples(app)`
gives each command without an example in its docstring the one below as its epilog.
Only typer and the standard library are imported: this runs at start-up.
"""

from __future__ import annotations

import typer
import typer.core

# Python type names as a user reads them.
VALUE_NAMES = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "NUMBER",
    "path": "PATH",
    "file": "FILE",
    "dir": "DIR",
    "datetime": "WHEN",
    "int range": "INTEGER",
    "float range": "NUMBER",
}

# One or two example lines per command path; a command whose docstring has "Example" keeps
# its own.
EXAMPLES: dict[str, str] = {
    "retain": 'mem retain "Decided to book the Lisbon trip for May 9-16." --at 2026-03-21 '
    "--context Maya\n\n  mem retain --jsonl notes.jsonl",
    "recall": 'mem recall "What did Maya decide about the Lisbon trip?" --max-tokens 1000\n\n'
    '  mem recall "Lisbon" --format json | jq ".results[].text"',
    "stats": "mem stats --json",
    "bench": "mem bench --dataset ../shared/datasets/locomo-dev.json --format locomo --limit 50",
    "list": "mem list --tag travel --since 2026-01-01 --limit 20",
    "show": "mem show 12 14 --format json",
    "forget": 'mem forget --query "old phone number" --dry-run\n\n  mem forget 12 --yes',
    "correct": 'mem correct 12 "The Lisbon flight is on May 10, not May 9."',
    "export": "mem export --with-vectors -o backup.jsonl",
    "import": "mem import backup.jsonl --into restored",
    "reembed": "mem --bank notes reembed --embedder e5",
    "banks": "mem banks --rename work office",
}


def _plain(label: str | None) -> str | None:
    if not label:
        return label
    inner = label[1:-1] if label.startswith("<") and label.endswith(">") else label
    while inner.startswith("list[") and inner.endswith("]"):
        inner = inner[5:-1]
    if "|" in inner:  # choices: keep them, they are the values to type
        return f"[{inner}]"
    inner = ",".join(VALUE_NAMES.get(p.lower(), p.upper()) for p in inner.split(","))
    return inner


def plain_value_names() -> None:
    """Show value names (TEXT, INTEGER, PATH, [a|b]) instead of Python types, and none after
    a flag; with NO_COLOR, plain help with no styling at all (rich would still print bold and
    dim). Idempotent."""
    import os

    if os.environ.get("NO_COLOR"):
        typer.core.HAS_RICH = False  # read by typer each time it formats help
    for cls in (typer.core.TyperOption, typer.core.TyperArgument):
        if getattr(cls.display_type, "_mem_plain", False):
            continue
        original = cls.display_type

        def display_type(self, ctx, _original=original):
            if getattr(self, "is_flag", False) or getattr(self, "count", False):
                return None
            return _plain(_original(self, ctx))

        display_type._mem_plain = True  # type: ignore[attr-defined]
        cls.display_type = display_type  # type: ignore[method-assign]


def add_examples(app: typer.Typer) -> None:
    """Give every registered command without one an example (shown at the end of --help)."""
    if not app.info.epilog:
        app.info.epilog = (
            'Example:\n\n  mem retain "Maya prefers aisle seats." --context Maya\n\n'
            '  mem recall "Where does Maya like to sit?"'
        )
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__ if info.callback else "")
        doc = info.help or (info.callback.__doc__ if info.callback else "") or ""
        example = EXAMPLES.get(name)
        if example and "Example" not in doc and not info.epilog:
            info.epilog = f"Example:\n\n  {example}"
