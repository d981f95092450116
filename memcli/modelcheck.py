"""Which models are active and where they come from, and checking a GGUF before it is
recorded as the embedder or the reranker (`mem models`, `mem models add`).

A GGUF is read with the `gguf` package (metadata only; no model is loaded): its
architecture, pooling type and size decide whether llama.cpp can use it for the role. An
embedder needs a pooled output (mean, CLS or last token); a reranker needs RANK pooling with
a classifier head (memcli/models/reranker.py checks that part, as it does before a load).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memcli.models import ModelError

POOLING_NAMES = {-1: "unspecified", 0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}
EMBEDDING_POOLINGS = {1, 2, 3}
ROLES = ("embedder", "reranker")


@dataclass
class GGUFInfo:
    path: Path
    name: str | None
    architecture: str
    pooling: int | None
    embedding_length: int | None
    causal: bool | None
    tensors: int

    @property
    def pooling_name(self) -> str:
        return "unset" if self.pooling is None else POOLING_NAMES.get(self.pooling, "unknown")

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "name": self.name,
            "architecture": self.architecture,
            "pooling": self.pooling_name,
            "embedding_length": self.embedding_length,
            "causal": self.causal,
            "tensors": self.tensors,
        }


def read_gguf(path: Path) -> GGUFInfo:
    """The metadata that decides a GGUF's role, read with gguf.GGUFReader."""
    from memcli.models.embedder import check_gguf_file

    check_gguf_file(path, "model")
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001 - gguf raises ValueError, struct.error, ...
        raise ModelError(f"{path} is a damaged GGUF file: {exc}") from None

    def value(key: str) -> Any:
        field = reader.fields.get(key)
        if field is None:
            return None
        try:
            return field.contents()
        except Exception:  # noqa: BLE001 - an unreadable field counts as absent
            return None

    arch = value("general.architecture") or "?"
    pooling = value(f"{arch}.pooling_type")
    length = value(f"{arch}.embedding_length")
    causal = value(f"{arch}.attention.causal")
    return GGUFInfo(
        path=path,
        name=value("general.name"),
        architecture=str(arch),
        pooling=int(pooling) if pooling is not None else None,
        embedding_length=int(length) if length is not None else None,
        causal=bool(causal) if causal is not None else None,
        tensors=len(reader.tensors),
    )


def check_for_role(path: Path, role: str) -> GGUFInfo:
    """The file's info when llama.cpp can use it as `role`, else ModelError saying why."""
    if role not in ROLES:
        raise ModelError(f"unknown role {role!r} (use embedder or reranker)")
    info = read_gguf(path)
    if role == "embedder":
        if info.pooling == 4:
            raise ModelError(f"{path.name} has RANK pooling: it is a reranker (use --as reranker)")
        if info.pooling not in EMBEDDING_POOLINGS:
            raise ModelError(
                f"{path.name} is not an embedding model: its pooling is {info.pooling_name} "
                f"({info.architecture}); an embedder needs mean, cls or last pooling"
            )
        if not info.embedding_length:
            raise ModelError(f"{path.name}: no {info.architecture}.embedding_length")
        return info
    from memcli.models.reranker import check_reranker_file

    check_reranker_file(path)  # RANK pooling, a cls.output head, not a decoder
    return info


def builtin_embedders() -> list[dict[str, Any]]:
    """The embedders mem ships (converted on first use) and whether the cache has them."""
    from memcli.models.load import BUILTIN_ALIASES
    from memcli.paths import cache_dir

    folder = cache_dir() / "models"
    out = []
    for name in sorted(set(BUILTIN_ALIASES.values())):
        aliases = sorted(a for a, n in BUILTIN_ALIASES.items() if n == name and a != name.lower())
        cached = sorted(folder.glob(f"{name}-*.gguf")) if folder.is_dir() else []
        out.append(
            {
                "name": name,
                "aliases": aliases,
                "converted": str(cached[-1]) if cached else None,
            }
        )
    return out


def active_embedder(store: Any | None, bank: str, override: str | None) -> dict[str, Any]:
    """The embedder recall and retain would use for the bank, and why."""
    from memcli.models import choice

    recorded = None
    if store is not None:
        bank_id = store.banks.bank_id(bank)
        if bank_id is not None:
            recorded = store.vectors.bank_embedder(bank_id)[0]
    picked = choice.for_bank(recorded, override, bank=bank)
    why = {
        "explicit": "the embedder setting",
        "bank": f"bank {bank!r} was made with it",
        "default": "the default for a new bank (e5 when its first text is mostly CJK)",
    }.get(picked.reason, picked.reason)
    return {"spec": picked.spec, "reason": why, "bank_recorded": recorded}


def banks_of_other_models(banks: list[Any], spec: str) -> list[tuple[str, str]]:
    """(bank, its model) of every bank whose vectors another model than `spec` made: with
    `spec` as the embedder setting every recall and retain in them would fail (the setting
    is explicit, and an explicit embedder wins over a bank's own). Banks with no vectors
    yet are not at odds."""
    from memcli.models.load import builtin_name
    from memcli.store.vectors import same_model_name

    embedded = [bank for bank in banks if bank.embedder]
    if not embedded:
        return []
    wanted = builtin_name(spec)
    if wanted is None:  # a GGUF path: the model's own name, as a bank records it
        try:
            wanted = read_gguf(Path(spec)).name or Path(spec).stem
        except ModelError:  # unreadable here: its file name is all there is to go by
            wanted = Path(spec).stem
    at_odds = []
    for bank in embedded:
        recorded = bank.embedder
        if recorded and not same_model_name(recorded, wanted):
            at_odds.append((bank.bank, recorded))
    return at_odds
