"""Sentence embeddings with llama.cpp (default: all-MiniLM-L6-v2 converted to GGUF).

We drive decoding ourselves instead of calling `Llama.embed()`: that lets us truncate with the
[SEP] kept at the end, and keep each decode small (~128 tokens). Packing a full 512-token batch
is much slower because attention over a batch costs the square of its token count.
"""

from __future__ import annotations

import ctypes
import os
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memcli.models import ModelError

# Tokens per decode. Measured on 2 cores (best of 6 runs): 64 and 128 tie (~420-530 short
# texts/s, ~100 passages/s of 60 tokens); 256 is ~20% slower and 512 about 2x slower.
DECODE_TOKEN_BUDGET = 128
N_CTX = 512

_quiet_lock = threading.Lock()
_quiet_callback: Any = None


def _silence_llama_logs() -> None:
    """Route llama.cpp / ggml logging to nowhere (mem's stdout is read by programs and LLMs).

    llama-cpp-python installs a callback that still prints errors to stderr; ours drops all.
    The ctypes callback object is kept alive in a module global so it is never collected.
    """
    global _quiet_callback
    with _quiet_lock:
        if _quiet_callback is not None:
            return
        import llama_cpp

        @llama_cpp.llama_log_callback
        def _drop(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            return None

        llama_cpp.llama_log_set(_drop, ctypes.c_void_p(0))
        _quiet_callback = _drop


def check_gguf_file(path: Path, what: str) -> None:
    """Fail early, in one line, for a path that is missing or not a GGUF file."""
    if not path.exists():
        raise ModelError(f"{what} not found: {path}")
    if not path.is_file():
        raise ModelError(f"{what} is not a file: {path}")
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    if magic != b"GGUF":
        raise ModelError(f"{what} is not a GGUF model file: {path}")


# One thread decodes as fast as two for MiniLM-sized models (measured on 2 cores), and it
# leaves the other core to the keyword arm; llama.cpp's spinning threads also slow down sharply
# when the machine is busy. MEM_THREADS overrides.
N_THREADS = max(1, int(os.environ.get("MEM_THREADS", "1") or 1))


class LlamaRunner:
    """One llama.cpp model + context that decodes several token sequences per call.

    Shared by the embedder (MEAN/CLS pooling) and the reranker (RANK pooling); both read one
    pooled vector per sequence with llama_get_embeddings_seq.
    """

    def __init__(self, path: Path, *, pooling_type: int | None = None, n_ctx: int = N_CTX):
        _silence_llama_logs()
        import llama_cpp

        kwargs: dict[str, Any] = {}
        if pooling_type is not None:
            kwargs["pooling_type"] = pooling_type
        try:
            self.llama = llama_cpp.Llama(
                model_path=str(path),
                embedding=True,
                n_ctx=n_ctx,
                n_batch=n_ctx,
                n_ubatch=n_ctx,
                verbose=False,
                n_threads=N_THREADS,
                n_threads_batch=N_THREADS,
                **kwargs,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"llama.cpp cannot load {path}: {exc}") from exc
        self._lock = threading.Lock()  # one llama context: decodes must not interleave
        model = self.llama._model
        self.n_ctx = min(n_ctx, model.n_ctx_train())
        self.n_embd = model.n_embd()
        self.n_seq_max = int(self.llama.context_params.n_seq_max)
        self.cls_id = model.token_bos()
        self.sep_id = model.token_sep()
        if self.sep_id < 0:
            self.sep_id = model.token_eos()
        self.metadata: dict[str, str] = dict(self.llama.metadata)

    def tokenize(self, text: str, max_tokens: int) -> list[int]:
        """Token ids of text without special tokens, at most max_tokens of them."""
        if max_tokens <= 0:
            return []
        # Each WordPiece token covers at least one character in practice; cutting very long
        # input first keeps tokenizing a huge text cheap, and it is truncated anyway.
        raw = text[: max_tokens * 32].encode("utf-8", errors="replace")
        ids = self.llama._model.tokenize(raw, add_bos=False, special=False)
        return ids[:max_tokens]

    def run(self, seqs: Sequence[Sequence[int]], width: int) -> np.ndarray:
        """Decode seqs (each at most n_ctx tokens) as separate sequences of one batch.

        Returns the first `width` floats of each sequence's pooled output, shape (n, width).
        The caller keeps the batch within n_ctx tokens and n_seq_max sequences.
        """
        import llama_cpp

        out = np.empty((len(seqs), width), dtype=np.float32)
        if not seqs:
            return out
        with self._lock:
            batch = self.llama._batch
            ctx = self.llama._ctx
            batch.reset()
            for i, ids in enumerate(seqs):
                batch.add_sequence(list(ids), i, True)
            ctx.kv_cache_clear()
            ctx.decode(batch)
            for i in range(len(seqs)):
                ptr = llama_cpp.llama_get_embeddings_seq(ctx.ctx, i)
                if not ptr:
                    raise ModelError("llama.cpp returned no pooled output for a sequence")
                out[i] = np.ctypeslib.as_array(ptr, shape=(width,))
            batch.reset()
        return out

    def pack(self, lengths: Sequence[int], budget: int) -> list[list[int]]:
        """Group item indices (shortest first) into decodes of at most budget tokens each."""
        budget = min(max(budget, 1), self.n_ctx)
        groups: list[list[int]] = []
        cur: list[int] = []
        used = 0
        for i in sorted(range(len(lengths)), key=lengths.__getitem__):
            n = lengths[i]
            if cur and (used + n > budget or len(cur) >= self.n_seq_max):
                groups.append(cur)
                cur, used = [], 0
            cur.append(i)
            used += n
        if cur:
            groups.append(cur)
        return groups


@dataclass(frozen=True)
class TextRules:
    """How a model wants its input, as it was trained: prefixes for queries and for stored
    text (e5: "query: " / "passage: "), a Unicode normalisation applied first (e5's tokenizer
    normalises with NFKC, which llama.cpp's does not do), and the languages it knows
    ("en", "multilingual", or None when unknown) so recall can weigh it for a query."""

    query_prefix: str = ""
    passage_prefix: str = ""
    normalization: str | None = None
    languages: str | None = None

    def _clean(self, text: str) -> str:
        if not self.normalization:
            return text
        text = unicodedata.normalize(self.normalization, text)  # type: ignore[arg-type]
        # SentencePiece's nmt_nfkc also drops control characters and makes every space one.
        text = "".join(ch for ch in text if ch.isspace() or unicodedata.category(ch) != "Cc")
        return " ".join(text.split())

    def query(self, text: str) -> str:
        return self.query_prefix + self._clean(text)

    def passage(self, text: str) -> str:
        return self.passage_prefix + self._clean(text)

    @property
    def english_only(self) -> bool:
        return self.languages == "en"


# Rules of models we know by their general.name, for GGUF files that do not carry memcli.*
# keys (the MiniLM cache converted by earlier versions, an e5 GGUF converted elsewhere).
KNOWN_RULES = {
    "all-MiniLM-L6-v2": TextRules(languages="en"),
    "multilingual-e5-small": TextRules("query: ", "passage: ", "NFKC", "multilingual"),
}


def rules_from_metadata(metadata: dict[str, str], name: str) -> TextRules:
    from memcli.models.convert import RULE_KEYS

    known = KNOWN_RULES.get(name, TextRules())
    return TextRules(
        metadata.get(RULE_KEYS["query_prefix"], known.query_prefix),
        metadata.get(RULE_KEYS["passage_prefix"], known.passage_prefix),
        metadata.get(RULE_KEYS["normalization"], known.normalization) or None,
        metadata.get(RULE_KEYS["languages"], known.languages) or None,
    )


class Embedder:
    """Turns texts into L2-normalised float32 vectors for cosine search.

    `name` is the model's own name (GGUF general.name, not the file name) and `fingerprint`
    the sha256 of the GGUF file: a renamed copy is the same model, another model is not.
    `embed` is for stored text (passages), `embed_query` for queries; `rules` says how each
    is prepared for this model.
    """

    def __init__(self, path: str | Path, *, token_budget: int = DECODE_TOKEN_BUDGET):
        path = Path(path).expanduser()
        check_gguf_file(path, "embedding model")
        self.path = path
        self._runner = LlamaRunner(path)
        pooling = self._runner.llama._ctx.pooling_type()
        if pooling not in (1, 2, 3):  # MEAN, CLS, LAST give one n_embd vector per sequence
            kind = {0: "no pooling", 4: "RANK pooling (a reranker)"}.get(pooling, "no pooling")
            raise ModelError(f"{path.name} is not an embedding model: it has {kind}")
        meta = self._runner.metadata
        self.name: str = (meta.get("general.name") or "").strip() or path.stem
        self.rules = rules_from_metadata(meta, self.name)
        from memcli.models.convert import sha256_cached

        try:
            self.fingerprint: str = sha256_cached(path)
        except OSError as exc:
            raise ModelError(f"cannot read embedding model {path}: {exc.strerror}") from exc
        self.dim: int = self._runner.n_embd
        self.center = _read_center(meta, self.dim, path)
        self.token_budget = token_budget
        # sentence-transformers' limit (written by our converter) else the context size.
        limit = meta.get("memcli.max_seq_length")
        self.max_tokens: int = min(int(limit), self._runner.n_ctx) if limit else self._runner.n_ctx

    def _ids(self, text: str) -> list[int]:
        r = self._runner
        return [r.cls_id, *r.tokenize(text, self.max_tokens - 2), r.sep_id]

    def token_ids(self, text: str, *, query: bool = False) -> list[int]:
        """The ids the model sees for text (with its rules applied and the special tokens)."""
        return self._ids(self.rules.query(text) if query else self.rules.passage(text))

    def _embed_prepared(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        seqs = [self._ids(t) for t in texts]
        for group in self._runner.pack([len(s) for s in seqs], self.token_budget):
            out[group] = self._runner.run([seqs[i] for i in group], self.dim)
        if self.center is not None:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            np.divide(out, norms, out=out, where=norms > 0)
            out -= self.center
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for stored texts (passages), shape (len(texts), dim), rows of unit length;
        long texts truncated."""
        return self._embed_prepared([self.rules.passage(t) for t in texts])

    embed_passages = embed

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed_prepared([self.rules.query(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]


def _read_center(meta: dict[str, str], dim: int, path: Path) -> np.ndarray | None:
    """The vector to subtract from each unit-length pooled vector (memcli.center), if any."""
    import base64
    import binascii

    from memcli.models.convert import RULE_KEYS

    raw = meta.get(RULE_KEYS["center"])
    if not raw:
        return None
    try:
        center = np.frombuffer(base64.b64decode(raw, validate=True), dtype="<f4")
    except (binascii.Error, ValueError) as exc:
        raise ModelError(f"{path.name}: unreadable {RULE_KEYS['center']}: {exc}") from exc
    if center.shape != (dim,):
        raise ModelError(f"{path.name}: {RULE_KEYS['center']} has {center.size} values, not {dim}")
    return center.astype(np.float32)


# Built-in embedders by name (and short aliases): what `--embedder NAME` and a bank's recorded
# name resolve to. Anything else is a path to a GGUF file.
BUILTIN_ALIASES = {
    "minilm": "all-MiniLM-L6-v2",
    "all-minilm-l6-v2": "all-MiniLM-L6-v2",
    "e5": "multilingual-e5-small",
    "multilingual-e5-small": "multilingual-e5-small",
}


def builtin_name(spec: str) -> str | None:
    """The built-in model a name means ("e5" -> multilingual-e5-small), None for a path."""
    return BUILTIN_ALIASES.get(spec.strip().lower())


def builtin_path(name: str) -> Path:
    if name == "multilingual-e5-small":
        from memcli.models.e5 import e5_embedder_path

        return e5_embedder_path()
    from memcli.models.convert import default_embedder_path

    return default_embedder_path()


_cache: dict[Path, Embedder] = {}
_cache_lock = threading.Lock()


def resolve_embedder_path(spec: str | Path | None) -> Path:
    """A GGUF path for an embedder spec: None (the default MiniLM), a built-in name or alias
    ("e5", "minilm", "multilingual-e5-small"), or a path."""
    if spec is None:
        return builtin_path("all-MiniLM-L6-v2")
    if isinstance(spec, str):
        name = builtin_name(spec)
        if name is not None:
            return builtin_path(name)
    return Path(spec).expanduser()


def load_embedder(path: str | Path | None = None) -> Embedder:
    """The embedder for path or name (None: the bundled MiniLM), loaded once per process."""
    key = resolve_embedder_path(path).resolve()
    with _cache_lock:
        emb = _cache.get(key)
        if emb is None:
            emb = _cache[key] = Embedder(key)
        return emb
