"""The closed sets of values mem takes, each defined once.

`str` enums: the CLI (typer) offers their values as choices, the MCP server (pydantic) puts
them in its tools' schemas, and the library compares them with plain strings (`"world" ==
FactType.world`), so a caller may pass either.
"""

from __future__ import annotations

from enum import Enum


class _Choice(str, Enum):
    def __str__(self) -> str:
        return self.value

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(member.value for member in cls)


class FactType(_Choice):
    """What a fact is: about the world, the speaker's own experience, or an observation."""

    world = "world"
    experience = "experience"
    observation = "observation"


class TagsMatch(_Choice):
    """How tags filter: any / all also let untagged facts through, the strict modes do not,
    exact wants just these tags (memcli/store/search.py)."""

    any = "any"
    all = "all"
    any_strict = "any_strict"
    all_strict = "all_strict"
    exact = "exact"


class Budget(_Choice):
    """Candidates per recall arm: low 100, mid 300, high 1000."""

    low = "low"
    mid = "mid"
    high = "high"
