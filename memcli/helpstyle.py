"""How `mem --help` reads: value names instead of Python types, an example per command, and
a layout that fits the terminal.

typer (0.29) shows each option's Python annotation (`--json <bool>`, `--tag <list[str]>`);
a user of a command-line tool wants the kind of value (`--tag TEXT`) and nothing after a
flag. `plain_value_names()` changes that for every command at once; `add_examples(app)`
gives each command without an example in its docstring the one below as its epilog.

rich's option tables need room: at 80 columns `mem recall --help` cut option names
(`--max-chunk-toke…`) and wrapped each description into an 18-character column, and at 40 it
was unreadable. Below RICH_MIN_COLUMNS the help is plain text laid out for the width: each
option on its own line, its description under it across the whole width (`fit_help()`).
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


# The narrowest terminal rich's tables of options read well in.
RICH_MIN_COLUMNS = 100
# How far a description sits under its option in the plain layout.
DESCRIPTION_INDENT = 4


def terminal_columns() -> int:
    """The terminal's width ($COLUMNS first; 80 when there is no terminal)."""
    import shutil

    return shutil.get_terminal_size(fallback=(80, 24)).columns


def fit_help(columns: int | None = None) -> None:
    """Lay help out for a terminal narrower than RICH_MIN_COLUMNS: plain text, as wide as
    the terminal, each option's description under it (see the module docstring)."""
    from typer._click import formatting

    width = terminal_columns() if columns is None else columns
    if width >= RICH_MIN_COLUMNS:
        return
    typer.core.HAS_RICH = False
    formatting.FORCED_WIDTH = max(width - 1, 20)
    formatter = formatting.HelpFormatter
    if not getattr(formatter.write_dl, "_mem_stacked", False):
        formatter.write_dl = _write_dl  # type: ignore[method-assign]


def _write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:  # noqa: ANN001
    """click's definition list (options, commands), for any width: options each on its
    line(s) with the description under it; names short enough to leave a description most
    of the line (commands, arguments) side by side with it."""
    from typer._click.formatting import term_len, wrap_text

    rows = [(first, second or "") for first, second in rows]
    if not rows:
        return
    indent = self.current_indent
    room = self.width - indent
    names = max(term_len(first) for first, _ in rows)
    options = any(first.startswith("-") for first, _ in rows)
    if not options and names + col_spacing <= min(col_max, room // 3):
        column = names + col_spacing
        for first, second in rows:
            lines = wrap_text(second, max(room - column, 10)).splitlines() or [""]
            self.write(f"{'':>{indent}}{first:<{column}}{lines[0]}".rstrip() + "\n")
            for line in lines[1:]:
                self.write(f"{'':>{indent + column}}{line}\n")
        return
    for first, second in rows:
        for number, line in enumerate(_wrap_name(first, room - 2)):
            self.write(f"{'':>{indent + (2 if number else 0)}}{line}\n")
        if second:
            under = indent + DESCRIPTION_INDENT
            text = wrap_text(second, max(self.width - under, 10), preserve_paragraphs=True)
            for line in text.splitlines():
                self.write(f"{'':>{under}}{line}".rstrip() + "\n")


_write_dl._mem_stacked = True  # type: ignore[attr-defined]


def _wrap_name(text: str, width: int) -> list[str]:
    """An option's names and value as lines of at most `width`: broken at spaces, and a list
    of choices that is too long on its own after its "|" separators."""
    pieces: list[str] = []
    for word in text.split(" "):
        while len(word) > width and "|" in word[:width]:
            cut = word.rindex("|", 0, width) + 1
            pieces.append(word[:cut])
            word = word[cut:]
        pieces.append(word)
    lines: list[str] = []
    for piece in pieces:
        glue = "" if lines and lines[-1].endswith("|") else " "
        if lines and len(lines[-1]) + len(glue) + len(piece) <= width:
            lines[-1] += glue + piece
        else:
            lines.append(piece)
    return lines
