"""mem's own option conversion (memcli/cliparams.py) gives what typer's pydantic one gives,
for every option and argument of every command (tests/test_startup.py checks that a recall
never imports pydantic)."""

from __future__ import annotations

import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import typer.main
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param

from memcli.cli import app
from memcli.cliparams import converter


def every_param() -> list[tuple[str, Any]]:
    out = []

    def walk(cmd, path):
        for p in cmd.params:
            if getattr(p, "type_descriptor", None) is not None:
                out.append((f"{path} {p.name}".strip(), p))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "")
    return out


def samples(annotation: Any, tmp: Path) -> list[Any]:
    origin = get_origin(annotation)
    if origin is list:
        (item,) = get_args(annotation)
        one = samples(item, tmp)
        return [one[:1], one[:2], []]
    if origin is tuple:
        parts = [samples(a, tmp) for a in get_args(annotation)]
        return [tuple(p[0] for p in parts), tuple(p[0] for p in parts[:1]), "not a tuple"]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        values = [m.value for m in annotation]
        return [*values, values[0].upper(), list(annotation)[0], "bogus", ""]
    if annotation is bool:
        return ["true", "no", "1", "off", "maybe", True, False]
    if annotation is int:
        return ["12", "-3", "0", "abc", "1.5", "", "100000", "9223372036854775807"]
    if annotation is float:
        return ["0.5", "1e3", "-2", "x", ""]
    if annotation is str:
        return ["abc", "", "ünï code", "--not-an-option"]
    if isinstance(annotation, type) and issubclass(annotation, Path):
        (tmp / "a-file").write_text("x")
        return [str(tmp), str(tmp / "a-file"), str(tmp / "missing" / "x.db"), "-"]
    raise AssertionError(f"no samples for {annotation!r}: add them, mem's options grew a type")


def outcome(runtime, value, param) -> tuple[str, Any]:
    try:
        return "ok", runtime.coerce(value, param=param, ctx=None)
    except BadParameter:
        return "error", None


PARAMS = every_param()


def test_every_option_has_a_plain_converter():
    """If typer's conversion is kept for an option, start-up pays for pydantic again."""
    missing = [
        name
        for name, p in PARAMS
        if p.type_descriptor.file_annotation is not None
        or converter(p.type_descriptor.annotation, p.type_descriptor.parameter_info) is None
    ]
    assert not missing, missing


@pytest.mark.parametrize("name,param", PARAMS, ids=[n for n, _ in PARAMS])
def test_same_values_and_errors_as_typer(name, param, tmp_path):
    descriptor = param.type_descriptor
    ours = param.get_runtime_param()
    assert getattr(ours, "convert", None) is not None, "cliparams.install() is not in effect"
    theirs = build_runtime_param(descriptor)
    for value in samples(descriptor.annotation, tmp_path):
        assert outcome(ours, value, param) == outcome(theirs, value, param), (name, value)
    # The one difference, on purpose: what SQLite cannot hold, or no number at all.
    refused = {
        int: ["9223372036854775808", "-99999999999999999999999"],
        float: ["nan", "inf", "-Infinity", "1e400"],
    }.get(descriptor.annotation, [])
    for value in refused:
        assert outcome(ours, value, param) == ("error", None), (name, value)


def test_a_bad_value_is_a_usage_error_naming_the_option(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memcli",
            "--db",
            str(tmp_path / "m.db"),
            "recall",
            "x",
            "--max-tokens",
            "abc",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "--max-tokens" in proc.stderr and "'abc' is not a valid integer" in proc.stderr
    assert "Traceback" not in proc.stderr
