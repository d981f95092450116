"""The one root of every error mem's library raises.

A `MemError` is one line a person can act on. `field` names the argument it is about, in the
library's own words (`max_tokens`, `tags`, `document_id`), and `usage` says whether the
caller asked for something impossible (a usage error: the CLI exits 2) or the data, the store
or the machine failed (exit 1). Each front end renders the field its own way: the CLI as its
flag (`--max-tokens`), the MCP server as the tool's argument (`max_tokens`); library text
never names a flag.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# The library's argument names, as a message may mention them: "{source_id}" in a message is
# rendered by each front end as it names that argument (`--source-id`, `source_id`).
ARGUMENTS = frozenset(
    {
        "append", "arms", "as_of", "at", "bank", "before", "budget", "context", "document_id",
        "embedder", "fact_id", "ids", "include_invalid", "into", "items", "limit",
        "max_chunk_tokens", "max_tokens", "min_score", "now", "offset", "query", "reembed",
        "since", "source_id", "supersedes", "tags", "tags_match", "text", "type", "types",
        "until",
    }
)  # fmt: skip
_MENTION = re.compile(r"\{([a-z_]+)\}")


class MemError(Exception):
    """An error of mem's library: one line, about `field` when it names an argument."""

    def __init__(self, message: str, *, field: str | None = None, usage: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.usage = usage

    def __str__(self) -> str:
        return self.describe()

    def describe(self, name_of: Callable[[str], str] | None = None) -> str:
        """The message, led by the field, with every argument it mentions named as the
        front end names it (`name_of`; default: the library's own names)."""
        name = name_of or (lambda argument: argument)
        text = _MENTION.sub(lambda m: name(m[1]) if m[1] in ARGUMENTS else m[0], self.message)
        return text if self.field is None else f"{name(self.field)}: {text}"
