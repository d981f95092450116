"""The CLI's documentation: every command's --help has an example and no Python types,
usage errors exit 2, and the completions and man page generated from the CLI are current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from memcli.cli import app

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def command_paths() -> list[list[str]]:
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="mem")
    out: list[list[str]] = [[]]

    def walk(cmd, path: list[str]) -> None:
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                out.append([*path, name])
                walk(sub, [*path, name])

    walk(root, [])
    return out


PYTHON_TYPES = re.compile(r"<(bool|str|int|float|path|list\[[^\]]*\])>|list\[|\bNoneType\b")


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "mem")
def test_help_has_an_example_and_no_python_types(path):
    r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    assert "Example" in r.stdout, f"mem {' '.join(path)} --help has no example"
    assert not PYTHON_TYPES.search(r.stdout), PYTHON_TYPES.search(r.stdout).group(0)


def test_usage_errors_exit_2_and_say_what_was_wrong(db_path):
    assert runner.invoke(app, ["--db", str(db_path), "retain", "x"]).exit_code == 0
    for args, needle in (
        (["recall", "x", "--arms", "bogus"], "unknown arm 'bogus'"),
        (["recall", "x", "--limit", "0"], "--limit"),
        (["recall", "x", "--now", "the day after never"], "--now"),
        (["retain", "x", "--at", "the day after never"], "--at"),
        (["recall", "x", "--budget", "huge"], "huge"),
        (["recall"], "QUERY"),
        (["no-such-command"], "No such command"),
    ):
        r = runner.invoke(app, ["--db", str(db_path), *args])
        assert r.exit_code == 2, (args, r.output)
        assert needle in r.stderr, (args, r.stderr)
