"""Commands that live in their own modules. Each module in COMMAND_MODULES has a
`register(app)` that adds its commands to the `mem` typer app; importing one must stay
light (typer and the standard library), its heavy imports inside the commands."""

from __future__ import annotations

import importlib

import typer

# One line per module; the order is the order in `mem --help`.
COMMAND_MODULES: list[str] = ["lifecycle", "sync", "agents", "config", "doctor", "models"]


def register_commands(app: typer.Typer) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"memcli.commands.{name}").register(app)
