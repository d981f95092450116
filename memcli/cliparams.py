"""Option values converted without pydantic, at start-up cost nil.

typer (0.29) converts every option it parses through a pydantic TypeAdapter: importing
pydantic and building ~20 adapters was ~0.2 s of every `mem recall` (measured with
`python -X importtime` and cProfile; the recall itself is ~0.1 s). The annotations mem uses
are few and plain -- str, int, float, bool, Path, an Enum of choices, lists and tuples of
those -- so `install()` gives typer a converter for exactly those, built on typer's own
choice and path checks (exists, file_okay, dir_okay...). Any other annotation, a custom
parser, or a typer without these internals keeps typer's own conversion: this changes
speed, never behaviour (tests/test_cliparams.py compares both on every option of every
command), except that an integer beyond SQLite's 64 bits or a number that is not finite is
refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

# How pydantic (and so typer) reads a bool written as text.
_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no", ""}

# memcli.store.INT64_MAX, restated: importing the store here would load apsw at start-up.
INT64_MAX = 2**63 - 1
Convert = Callable[[Any, Any, Any], Any]  # (value, param, ctx) -> value


def _bad(message: str, param: Any, ctx: Any) -> Exception:
    from typer._click.exceptions import BadParameter

    return BadParameter(message, ctx=ctx, param=param)


def _number(kind: type, info: Any) -> Convert:
    name = "integer" if kind is int else "number"
    low, high, clamp = info.min, info.max, info.clamp

    def convert(value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise _bad(f"{value!r} is not a valid {name}.", param, ctx)
        try:
            number = kind(value.strip()) if isinstance(value, str) else value
            if kind is int and isinstance(number, float):
                if not number.is_integer():
                    raise ValueError
                number = int(number)
        except ValueError:
            raise _bad(f"{value!r} is not a valid {name}.", param, ctx) from None
        # Where mem differs from typer on purpose: no option means anything beyond what
        # SQLite's INTEGER holds or a number that is not finite (NaN compares false with
        # every score, so --min-score nan kept everything).
        if kind is int and not -INT64_MAX - 1 <= number <= INT64_MAX:
            raise _bad(f"{value!r} is out of range (at most {INT64_MAX}).", param, ctx)
        if kind is float and not math.isfinite(number):
            raise _bad(f"{value!r} is not a finite number.", param, ctx)
        if clamp:
            if low is not None and number < low:
                return kind(low)
            if high is not None and number > high:
                return kind(high)
        elif (low is not None and number < low) or (high is not None and number > high):
            bounds = " and ".join(
                part
                for part in (
                    f">= {low}" if low is not None else "",
                    f"<= {high}" if high is not None else "",
                )
                if part
            )
            raise _bad(f"{number} is not {bounds}.", param, ctx)
        return number

    return convert


def _text(value: Any, param: Any, ctx: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _flag(value: Any, param: Any, ctx: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise _bad(f"{value!r} is not a valid boolean.", param, ctx)


def _leaf(annotation: Any, info: Any) -> Convert | None:
    from typer._param_types import coerce_cli_choice, coerce_cli_path, routes_to_path

    if info.parser is not None:
        return None
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        choices = list(annotation)

        def choice(value: Any, param: Any, ctx: Any) -> Any:
            try:
                return coerce_cli_choice(
                    value, choices=choices, case_sensitive=info.case_sensitive, ctx=ctx
                )
            except ValueError as exc:
                raise _bad(str(exc), param, ctx) from None

        return choice
    if annotation is bool:
        return _flag
    if annotation in (int, float):
        return _number(annotation, info)
    if annotation is str:
        return _text
    if (
        isinstance(annotation, type)
        and issubclass(annotation, Path)
        and routes_to_path(annotation, info)
    ):
        kind = info.path_type or annotation

        def path(value: Any, param: Any, ctx: Any) -> Any:
            # A Path in hand: typer checks it without building a pydantic adapter.
            value = value if isinstance(value, kind) else kind(_text(value, param, ctx))
            return coerce_cli_path(value, info, path_type=kind, param=param, ctx=ctx)

        return path
    return None


def converter(annotation: Any, info: Any) -> Convert | None:
    """The converter for one annotation, or None for typer's own."""
    origin = get_origin(annotation)
    if origin is list:
        (item,) = get_args(annotation)
        one = _leaf(item, info)
        if one is None:
            return None

        def many(value: Any, param: Any, ctx: Any) -> list:
            values = value if isinstance(value, (list, tuple)) else [value]
            return [one(v, param, ctx) for v in values]

        return many
    if origin is tuple:
        parts = [_leaf(a, info) for a in get_args(annotation)]
        if not parts or any(p is None for p in parts):
            return None

        def fixed(value: Any, param: Any, ctx: Any) -> tuple:
            if not isinstance(value, (list, tuple)):
                raise _bad("value is not a valid tuple", param, ctx)
            if len(value) != len(parts):
                raise _bad(f"{len(parts)} values are required, but {len(value)} given.", param, ctx)
            return tuple(p(v, param, ctx) for p, v in zip(parts, value, strict=True))

        return fixed
    if origin is not None:
        return None
    return _leaf(annotation, info)


def install() -> None:
    """Use these converters for every typer option and argument from now on. Idempotent;
    does nothing on a typer whose internals differ from 0.29's."""
    try:
        from typer import core
        from typer._coercion import RuntimeParam
    except ImportError:
        return
    base = getattr(core, "_TyperParameter", None)
    original = getattr(base, "get_runtime_param", None)
    if original is None or getattr(original, "_mem_plain", False):
        return

    @dataclass(frozen=True)
    class PlainRuntimeParam(RuntimeParam):
        convert: Convert | None = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            return self.convert(value, param, ctx)

    def get_runtime_param(self):  # noqa: ANN001, ANN202 - typer's own signature
        descriptor = getattr(self, "type_descriptor", None)
        if (
            getattr(self, "_runtime_param", None) is None
            and descriptor is not None
            and descriptor.file_annotation is None
        ):
            convert = converter(descriptor.annotation, descriptor.parameter_info)
            if convert is not None:
                self._runtime_param = PlainRuntimeParam(
                    descriptor.parameter_info, descriptor.annotation, convert
                )
        return original(self)

    get_runtime_param._mem_plain = True  # type: ignore[attr-defined]
    get_runtime_param._typer_original = original  # type: ignore[attr-defined]
    base.get_runtime_param = get_runtime_param
