"""Which embedder a bank uses, with no flags: the one it was made with, else the default,
multilingual-e5-small, for every language.

The default was chosen by measurement (bench/RESULTS.md, issue 35): on English conversations
(LoCoMo) e5 ranks better than all-MiniLM-L6-v2 (R@10 0.789 against 0.771, MRR 0.642
against 0.616 with everything else equal), on Chinese, Japanese and Korean far better, and one
model for every language keeps a bank of mixed languages searchable. It retains at about
half MiniLM's rate (12 layers instead of 6); its queries skip llama.cpp's tokenizer
(models/e5_query.py), so a cold recall does not pay for its 250k-piece vocabulary. Banks
made with MiniLM keep it (their fingerprint); `mem reembed` moves them to e5.

An explicit choice (`--embedder NAME|PATH`, MEM_EMBEDDER, the config file) always wins; when
it is not the bank's model, retain and recall refuse with a one-line error (store/vectors.py,
lifecycle.py) that names `mem reembed`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memcli import lang
from memcli.models import ModelError

MINILM_NAME = "all-MiniLM-L6-v2"
MULTILINGUAL_NAME = "multilingual-e5-small"
DEFAULT_NAME = MULTILINGUAL_NAME


@dataclass(frozen=True)
class EmbedderChoice:
    spec: str  # a built-in name or a path, for load_embedder
    reason: str  # for messages and --trace: "--embedder", "bank", "mostly CJK text", ...


def for_texts(texts: Iterable[str]) -> EmbedderChoice:
    """The embedder for a new bank whose first text is texts: the default, whatever the
    language (the default knows them all)."""
    share = lang.cjk_share(texts)
    return EmbedderChoice(DEFAULT_NAME, "new bank" if share == 0 else f"new bank, {share:.0%} CJK")


def for_bank(
    recorded_name: str | None,
    override: str | None,
    texts: Iterable[str] | None = None,
    *,
    bank: str = "default",
) -> EmbedderChoice:
    """The explicit override, else the bank's recorded model, else (a bank with no vectors
    yet) the choice for its first texts, else the default."""
    if override:
        return EmbedderChoice(override, "explicit")
    if recorded_name:
        from memcli.models.load import builtin_name
        from memcli.store.vectors import same_model_name

        name = builtin_name(recorded_name)
        if name is None:  # a name recorded by an older version: the cache file's stem
            name = next(
                (b for b in (MINILM_NAME, MULTILINGUAL_NAME) if same_model_name(recorded_name, b)),
                None,
            )
        if name is None:
            raise ModelError(
                f"bank {bank!r} was embedded with {recorded_name}, a model file mem does not "
                "ship: give that model's file as the {embedder}, or re-embed the bank with "
                "a model mem ships (reembed)"
            )
        return EmbedderChoice(name, "bank")
    if texts is not None:
        return for_texts(texts)
    return EmbedderChoice(DEFAULT_NAME, "default")


def language_warning(embedder: object, texts: Iterable[str], bank: str) -> str | None:
    """A warning when mostly-CJK text goes into a bank whose embedder knows English only:
    its vectors for that text are near noise, so recall leans on keywords alone."""
    rules = getattr(embedder, "rules", None)
    if rules is None or not rules.english_only:
        return None
    share = lang.cjk_share(texts)
    if share < lang.MOSTLY_CJK:
        return None
    name = getattr(embedder, "name", "its embedder")
    return (
        f"bank {bank!r} is embedded with {name}, which knows English only, and this text is "
        f"{share:.0%} Chinese/Japanese/Korean: re-embed the bank with "
        f"`mem --bank {bank} reembed --embedder e5`"
    )
