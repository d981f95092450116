"""Sentence embeddings with llama.cpp (default: all-MiniLM-L6-v2 converted to GGUF).

We drive decoding ourselves instead of calling `Llama.embed()`: that lets us truncate with the
[SEP] kept at the end, and keep each decode small (~128 tokens). Packing a full 512-token batch
is much slower because attention over a batch costs the square of its token count.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence
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


class Embedder:
    """Turns texts into L2-normalised float32 vectors for cosine search."""

    def __init__(self, path: str | Path, *, token_budget: int = DECODE_TOKEN_BUDGET):
        path = Path(path).expanduser()
        check_gguf_file(path, "embedding model")
        self.path = path
        self.name: str = path.stem
        self._runner = LlamaRunner(path)
        pooling = self._runner.llama._ctx.pooling_type()
        if pooling not in (1, 2, 3):  # MEAN, CLS, LAST give one n_embd vector per sequence
            kind = {0: "no pooling", 4: "RANK pooling (a reranker)"}.get(pooling, "no pooling")
            raise ModelError(f"{path.name} is not an embedding model: it has {kind}")
        self.dim: int = self._runner.n_embd
        self.token_budget = token_budget
        # sentence-transformers' limit (written by our converter) else the context size.
        limit = self._runner.metadata.get("memcli.max_seq_length")
        self.max_tokens: int = min(int(limit), self._runner.n_ctx) if limit else self._runner.n_ctx

    def _ids(self, text: str) -> list[int]:
        r = self._runner
        return [r.cls_id, *r.tokenize(text, self.max_tokens - 2), r.sep_id]

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for texts, shape (len(texts), dim), rows of unit length; long texts truncated."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        seqs = [self._ids(t) for t in texts]
        for group in self._runner.pack([len(s) for s in seqs], self.token_budget):
            out[group] = self._runner.run([seqs[i] for i in group], self.dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


_cache: dict[Path, Embedder] = {}
_cache_lock = threading.Lock()


def load_embedder(path: str | Path | None = None) -> Embedder:
    """The embedder for path (None: the bundled MiniLM), loaded once per process."""
    if path is None:
        from memcli.models.convert import default_embedder_path

        path = default_embedder_path()
    key = Path(path).expanduser().resolve()
    with _cache_lock:
        emb = _cache.get(key)
        if emb is None:
            emb = _cache[key] = Embedder(key)
        return emb
