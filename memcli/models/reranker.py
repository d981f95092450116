"""Cross-encoder reranking with llama.cpp (RANK pooling): one relevance score per pair.

No reranker weights ship on PyPI, so the model is a GGUF the user installs. We check its
metadata before llama.cpp sees it, so a wrong file gives a one-line error instead of garbage
scores (an embedding model loaded with RANK pooling would "work" and return noise).
"""

from __future__ import annotations

import math
import mmap
import struct
import threading
from pathlib import Path
from typing import Any

from memcli.models import ModelError
from memcli.models.embedder import N_CTX, LlamaRunner, check_gguf_file

# Tokens per decode. Measured on 2 cores with the MiniLM-sized test model (best of 4 runs):
# 32-128 tie (~250 short pairs/s, ~85 pairs/s of 77 tokens); 256 is ~25% and 512 ~2x slower,
# because attention over one decode costs the square of its token count.
DECODE_TOKEN_BUDGET = 128
POOLING_RANK = 4  # llama.cpp LLAMA_POOLING_TYPE_RANK / gguf.PoolingType.RANK

# GGUF value types -> struct format (8 = string, 9 = array are handled separately).
_SCALAR = dict(enumerate("BbHhIif?")) | {10: "Q", 11: "q", 12: "d"}


def read_gguf_header(path: Path) -> tuple[dict[str, Any], set[str]]:
    """Scalar/string metadata and tensor names of a GGUF file (array values are skipped).

    gguf.GGUFReader gives the same answers but takes ~0.65 s on a MiniLM file because it
    materialises every vocabulary string; this walks the header in ~20 ms.
    """
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        pos = 0

        def take(fmt: str) -> Any:
            nonlocal pos
            value = struct.unpack_from("<" + fmt, buf, pos)
            pos += struct.calcsize("<" + fmt)
            return value[0]

        def take_str() -> str:
            nonlocal pos
            n = take("Q")
            if n > len(buf) - pos:
                raise ValueError("string runs past the end of the file")
            pos += n
            return buf[pos - n : pos].decode("utf-8", errors="replace")

        def skip_array() -> None:
            nonlocal pos
            etype, count = take("I"), take("Q")
            if etype == 8:
                for _ in range(count):
                    n = take("Q")
                    pos += n
            elif etype in _SCALAR:
                pos += struct.calcsize("<" + _SCALAR[etype]) * count
            else:
                raise ValueError(f"unsupported array element type {etype}")

        if take("4s") != b"GGUF":
            raise ValueError("not a GGUF file")
        version = take("I")
        if version not in (2, 3):
            raise ValueError(f"unsupported GGUF version {version}")
        n_tensors, n_kv = take("Q"), take("Q")
        meta: dict[str, Any] = {}
        for _ in range(n_kv):
            key = take_str()
            vtype = take("I")
            if vtype == 8:
                meta[key] = take_str()
            elif vtype == 9:
                skip_array()
            elif vtype in _SCALAR:
                meta[key] = take(_SCALAR[vtype])
            else:
                raise ValueError(f"unknown metadata type {vtype} for {key}")
        names: set[str] = set()
        for _ in range(n_tensors):
            names.add(take_str())
            n_dims = take("I")
            pos += 8 * n_dims + 4 + 8  # dims, ggml type, data offset
        return meta, names


def check_reranker_file(path: Path) -> dict[str, Any]:
    """Raise ModelError unless path is a GGUF cross-encoder that llama.cpp can rank with."""
    check_gguf_file(path, "reranker model")
    try:
        meta, tensors = read_gguf_header(path)
    except (ValueError, struct.error, OSError) as exc:
        raise ModelError(f"reranker model {path} is a damaged GGUF file: {exc}") from exc
    arch = meta.get("general.architecture", "?")
    pooling = meta.get(f"{arch}.pooling_type")
    if pooling != POOLING_RANK:
        kind = {0: "none", 1: "mean", 2: "cls", 3: "last"}.get(pooling, "unset")  # type: ignore[arg-type]
        raise ModelError(
            f"{path.name} is not a reranker: its pooling is {kind}, a cross-encoder needs RANK"
            " (is it an embedding model?)"
        )
    if "cls.output.weight" not in tensors:
        raise ModelError(f"{path.name} is not a reranker: it has no cls.output classifier head")
    if meta.get(f"{arch}.attention.causal", True):
        raise ModelError(
            f"{path.name} is a decoder ({arch}) reranker; only BERT-style cross-encoders work"
        )
    return meta


def to_probabilities(raw: list[float]) -> list[float]:
    """Cross-encoder outputs as probabilities: NaN -> 0; if every score is already in [0, 1]
    (a model with its own sigmoid) they are kept, else all are logits and go through a sigmoid.

    Decided per batch, not per score: a per-score rule is not monotonic (0.9 would stay 0.9
    while the larger logit 1.1 became 0.75)."""
    finite = [v for v in raw if not math.isnan(v)]
    keep = all(0.0 <= v <= 1.0 for v in finite)
    out = []
    for v in raw:
        if math.isnan(v):
            out.append(0.0)
        elif keep:
            out.append(v)
        elif v >= 0:
            out.append(1.0 / (1.0 + math.exp(-v)))
        else:
            z = math.exp(v)  # no overflow for very negative logits
            out.append(z / (1.0 + z))
    return out


class Reranker:
    """Scores (query, document) pairs with a cross-encoder; higher means more relevant."""

    def __init__(self, path: str | Path, *, token_budget: int = DECODE_TOKEN_BUDGET):
        path = Path(path).expanduser()
        meta = check_reranker_file(path)
        self.path = path
        self.name: str = path.stem
        self.token_budget = token_budget
        self._runner = LlamaRunner(path, pooling_type=POOLING_RANK, n_ctx=N_CTX)
        # WordPiece (BERT): [CLS] q [SEP] d [SEP], as transformers builds a BERT pair.
        # Other encoders (e.g. XLM-R): bos q eos sep d eos, as llama.cpp's server does.
        self._wordpiece = meta.get("tokenizer.ggml.model") == "bert"
        self._eos_id = self._runner.eos_id if self._runner.eos_id >= 0 else self._runner.sep_id

    def _pair(self, query_ids: list[int], doc: str) -> list[int]:
        r = self._runner
        if self._wordpiece:
            room = r.n_ctx - len(query_ids) - 3
            return [r.cls_id, *query_ids, r.sep_id, *r.tokenize(doc, room), r.sep_id]
        room = r.n_ctx - len(query_ids) - 4
        return [r.cls_id, *query_ids, self._eos_id, r.sep_id, *r.tokenize(doc, room), self._eos_id]

    def score(self, query: str, documents: list[str]) -> list[float]:
        """Relevance of each document to query, in [0, 1], in the order given.

        Documents are truncated so each pair fits the context; the query keeps at most half.
        """
        if not documents:
            return []
        q = self._runner.tokenize(query, self._runner.n_ctx // 2)
        seqs = [self._pair(q, d) for d in documents]
        raw = [0.0] * len(seqs)
        # The arms are done: a reranker's decodes have the cores to themselves (threads.py).
        for group in self._runner.pack([len(s) for s in seqs], self.token_budget):
            out = self._runner.run([seqs[i] for i in group], 1, bulk=True)
            for i, value in zip(group, out[:, 0].tolist(), strict=True):
                raw[i] = value
        return to_probabilities(raw)


_cache: dict[Path, Reranker] = {}
_cache_lock = threading.Lock()


def load_reranker(path: str | Path) -> Reranker:
    """The reranker at path, checked and loaded once per process. Raises ModelError."""
    key = Path(path).expanduser()
    try:
        key = key.resolve()
    except OSError:
        pass
    with _cache_lock:
        rr = _cache.get(key)
        if rr is None:
            rr = _cache[key] = Reranker(key)
        return rr
