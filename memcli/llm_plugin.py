"""mem as an `llm` plugin (registered by this package's `llm` entry point, pyproject.toml).

- Fragment loader `mem:`: `llm -f mem:"Lisbon trip" "What did Maya decide?"` recalls the
  memories for "Lisbon trip" and puts them, as `mem recall` prints them for a pipe, before the
  question in the prompt.
- Tool `mem_recall`: `llm --tool mem_recall "..."` lets the model search the memory itself.

Which store and bank: the same settings as the CLI (MEM_DB, MEM_BANK, the config file; see
memcli/config.py), and the budget and max_tokens settings size the recall. Errors are one
line (llm shows them as "Could not load fragment ...").
"""

from __future__ import annotations

import os

import llm

# A fragment of memories should leave room for the question and answer in a small model's
# context; the `max_tokens` setting (MEM_MAX_TOKENS, config) overrides.
DEFAULT_FRAGMENT_TOKENS = 1500


def recall_text(query: str, max_tokens: int | None = None) -> str:
    """The memories for query as the text `mem recall` prints into a pipe."""
    from memcli import render
    from memcli.config import Settings
    from memcli.display import has_visible_text
    from memcli.memory import Memory

    if not query or not has_visible_text(query):
        raise ValueError('mem: give a query, e.g. mem:"Lisbon trip"')
    settings = Settings()
    # Checked before the models' modules load: the embedder reads MEM_THREADS when imported
    # ("invalid literal for int()" where the CLI names the setting).
    threads = settings.resolve("threads")
    tokens_setting = settings.resolve("max_tokens")
    if max_tokens is None:
        max_tokens = (
            tokens_setting.value if tokens_setting.source != "default" else DEFAULT_FRAGMENT_TOKENS
        )
    if threads.source.startswith("config"):
        # llama.cpp's thread count is read from MEM_THREADS when the model loads.
        os.environ.setdefault("MEM_THREADS", str(threads.value))
    # The store, bank, embedder and reranker `mem recall` uses (MEM_*, the config file), so
    # the fragment is what it prints.
    with Memory(
        settings.resolve("db").value,
        settings.resolve("bank").value,
        embedder=settings.resolve("embedder").value,
        reranker=settings.resolve("reranker").value,
        budget=settings.resolve("budget").value,
        max_tokens=max_tokens,
    ) as memory:
        memory.require_bank(memory.bank)
        result = memory.recall(query)
    text = render.to_text(result, decorate=False)
    if text:
        return text
    # Say so: an empty fragment would leave the model guessing from its own knowledge.
    if not result.ranked:
        from memcli.clock import utc_to_local

        day = utc_to_local(result.now).date()
        return f'No memories relevant to "{query}" were found (as of {day}).'
    return (
        f'{len(result.ranked)} memories matched "{query}" but none fit {max_tokens} tokens '
        "with the header line (raise MEM_MAX_TOKENS)."
    )


def load_memories(argument: str) -> llm.Fragment:
    """`-f mem:QUERY`: the recalled memories as a fragment."""
    return llm.Fragment(recall_text(argument), f"mem:{argument}")


def mem_recall(query: str) -> str:
    """Search the user's long-term memory (notes, decisions, conversations) and return the
    memories most relevant to the query, best first. Each line gives when it was said and,
    separately, the date it talks about; a plan said earlier about a later date is a plan,
    not something that already happened."""
    from memcli.display import has_visible_text

    # The model reads the reason instead of a crash; a tool call's arguments are the
    # model's, so their types are checked too.
    if not isinstance(query, str):
        return f"mem: error: the query must be text, not {type(query).__name__}"
    if not has_visible_text(query):
        return "mem: error: the query is empty: say what to search the memories for"
    try:
        return recall_text(query)
    except Exception as exc:  # noqa: BLE001
        return f"mem: error: {str(exc).removeprefix('mem: ')}"


@llm.hookimpl
def register_fragment_loaders(register) -> None:
    register("mem", load_memories)


@llm.hookimpl
def register_tools(register) -> None:
    register(mem_recall)
