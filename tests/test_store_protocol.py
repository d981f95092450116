"""The SQLite store satisfies memcli.store.protocol.StoreProtocol, part by part, and nothing
outside memcli/store/ speaks SQL or imports apsw.

The protocol is what recall, retain, the lifecycle, export/import and the doctor are typed
against; a second backend implements it. A method the protocol promises that a part lacks,
or takes other arguments, fails here (and in a type checker: StoreProtocol is a Protocol)."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path

import pytest

from memcli.store import Store
from memcli.store import protocol as P

PARTS = [
    name
    for name, member in inspect.getmembers(P.StoreProtocol)
    if isinstance(member, property) and name not in ("path", "readonly")
]


def _protocol_of(part: str) -> type:
    hints = typing.get_type_hints(getattr(P.StoreProtocol, part).fget, vars(P))
    return hints["return"]


def _methods(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in vars(cls).items()
        if callable(member) and not name.startswith("_")
    }


def _shape(fn: object) -> list[tuple[str, object, object]]:
    """Each parameter's name, kind and default: what a caller may rely on."""
    params = list(inspect.signature(fn).parameters.values())[1:]  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in params]


def test_every_part_of_the_protocol_is_a_part_of_the_store(tmp_path: Path) -> None:
    assert PARTS == sorted(
        [
            "banks",
            "documents",
            "entities",
            "exchange",
            "facts",
            "health",
            "links",
            "reembed",
            "search",
            "sources",
            "vectors",
        ]
    )
    with Store(tmp_path / "mem.db") as store:
        assert isinstance(store, P.StoreProtocol)
        for part in PARTS:
            assert hasattr(store, part), part


@pytest.mark.parametrize("part", PARTS)
def test_the_store_part_has_every_method_of_the_protocol_with_its_arguments(
    tmp_path: Path, part: str
) -> None:
    wanted = _methods(_protocol_of(part))
    assert wanted, part
    with Store(tmp_path / "mem.db") as store:
        have = getattr(store, part)
        for name, fn in wanted.items():
            assert hasattr(have, name), f"store.{part} lacks {name}"
            assert _shape(getattr(type(have), name)) == _shape(fn), f"store.{part}.{name}"


def test_the_store_itself_has_every_method_of_the_protocol(tmp_path: Path) -> None:
    for name, fn in _methods(P.StoreProtocol).items():
        assert _shape(getattr(Store, name)) == _shape(fn), name
    with Store(tmp_path / "mem.db") as store:
        reader = store.reader()
        try:
            assert isinstance(reader, P.StoreProtocol)
        finally:
            reader.close()
        token = store.change_token()
        with Store(tmp_path / "mem.db") as other, other.atomic():
            other.banks.ensure_bank("elsewhere", __import__("datetime").datetime(2026, 1, 1))
        assert store.change_token() != token  # another connection committed


ROOT = Path(__file__).resolve().parent.parent / "memcli"
# SQL as mem writes it: a statement's keywords in capitals (user text never is SQL).
_SQL = re.compile(
    r"\b(SELECT\s+.+\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"PRAGMA\s+\w+|CREATE\s+(VIRTUAL\s+)?(TABLE|INDEX|TRIGGER))\b"
)


def test_no_sql_and_no_apsw_outside_the_store() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if ROOT / "store" in path.parents:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\b(import|from)\s+(apsw|sqlite_vec|sqlite3)\b", line) or _SQL.search(
                line
            ):
                found.append(f"{path.relative_to(ROOT.parent)}:{number}: {line.strip()}")
    assert found == []
