"""Sentence embeddings with llama.cpp (default: all-MiniLM-L6-v2 converted to GGUF).

We drive decoding ourselves instead of calling `Llama.embed()`: that lets us truncate with the
[SEP] kept at the end, and keep each decode small (~128 tokens). Packing a full 512-token batch
is much slower because attention over a batch costs the square of its token count.
"""

from __future__ import annotations

import threading
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from memcli.models import ModelError
from memcli.models.convert import MAX_SEQ_KEY
from memcli.models.threads import ThreadChooser, fixed_threads

# Tokens per decode. Measured on 2 cores (best of 6 runs): 64 and 128 tie (~420-530 short
# texts/s, ~100 passages/s of 60 tokens); 256 is ~20% slower and 512 about 2x slower.
DECODE_TOKEN_BUDGET = 128
N_CTX = 512


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


# GGUF general.file_type of weights that are not quantized: F32, F16, BF16.
UNQUANTIZED_FILE_TYPES = ("0", "1", "32")


@lru_cache(maxsize=1)
def cpu_has_amx() -> bool:
    """Whether the CPU reports Intel AMX (Linux: /proc/cpuinfo's flags)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False


# A query decodes on one thread: it is one short decode, and the keyword arm runs on the other
# core meanwhile; llama.cpp's spinning threads also slow down sharply when the machine is busy.
# A bulk of passages chooses its count by measuring (models/threads.py). MEM_THREADS fixes both.
# (The CLI and the llm plugin check it against config.MAX_THREADS first.)
N_THREADS = fixed_threads() or 1


class LlamaRunner:
    """One llama.cpp model + context that decodes several token sequences per call, through
    llama.cpp's C API (memcli.models.llama_lib: the high-level `Llama` class costs a cold
    recall ~45 ms of imports and does nothing we use).

    Shared by the embedder (MEAN/CLS pooling) and the reranker (RANK pooling); both read one
    pooled vector per sequence with llama_get_embeddings_seq.
    """

    def __init__(self, path: Path, *, pooling_type: int | None = None, n_ctx: int | None = None):
        from memcli.models import llama_lib

        lib = self._lib = llama_lib.ready()
        self._model = self._ctx = self._batch = None
        self._model = self._load(path, extra_buffers=True)
        self.metadata: dict[str, str] = llama_lib.model_metadata(lib, self._model)
        if self.metadata.get("general.file_type") not in UNQUANTIZED_FILE_TYPES and cpu_has_amx():
            # llama.cpp moves quantized weights (q8_0, q4_0, ...) into an AMX buffer when the
            # CPU reports AMX, and its first tile instruction killed the process (general
            # protection fault) on a VM that reports AMX it does not give. Without extra
            # buffer types the weights stay in plain memory, for the AVX kernels.
            lib.llama_model_free(self._model)
            self._model = None
            self._model = self._load(path, extra_buffers=False)
        vocab = lib.llama_model_get_vocab(self._model)
        if n_ctx is None:
            # No longer than the longest input the model takes (MiniLM: 256 tokens): a
            # context of 512 costs a cold start ~20 ms more to set up, for the same vectors.
            limit = self.metadata.get(MAX_SEQ_KEY, "")
            n_ctx = min(N_CTX, int(limit)) if limit.isdigit() and int(limit) > 0 else N_CTX
        self.n_ctx = min(n_ctx, lib.llama_model_n_ctx_train(self._model))
        params = lib.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_ctx
        params.n_ubatch = n_ctx
        params.n_threads = N_THREADS
        params.n_threads_batch = N_THREADS
        params.embeddings = True
        params.n_seq_max = min(n_ctx, lib.llama_max_parallel_sequences())
        params.kv_unified = True
        # As llama-cpp-python's Llama sets them (the vectors stay bit for bit the same):
        # flash attention off, the model's own pooling and attention unless asked.
        params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.attention_type = lib.LLAMA_ATTENTION_TYPE_UNSPECIFIED
        params.pooling_type = (
            lib.LLAMA_POOLING_TYPE_UNSPECIFIED if pooling_type is None else pooling_type
        )
        self._ctx = lib.llama_init_from_model(self._model, params)
        if not self._ctx:
            self._ctx = None
            self.close()
            raise ModelError(f"llama.cpp cannot make a context for {path}")
        try:
            llama_lib.raise_deferred_interrupt()  # a Ctrl-C during the set-up's log callback
        except KeyboardInterrupt:
            self.close()
            raise
        self._memory = lib.llama_get_memory(self._ctx)
        self._batch = lib.llama_batch_init(n_ctx, 0, n_ctx)
        self._batch_size = n_ctx
        self._lock = threading.Lock()  # one llama context: decodes must not interleave
        self._threads = N_THREADS
        self.chooser = ThreadChooser.for_machine()
        self._vocab = vocab
        self.pooling_type = int(lib.llama_pooling_type(self._ctx))
        self.n_embd = int(lib.llama_model_n_embd(self._model))
        self.n_seq_max = int(params.n_seq_max)
        self.cls_id = int(lib.llama_vocab_bos(vocab))
        self.eos_id = int(lib.llama_vocab_eos(vocab))
        self.sep_id = int(lib.llama_vocab_sep(vocab))
        if self.sep_id < 0:
            self.sep_id = self.eos_id

    def _load(self, path: Path, *, extra_buffers: bool) -> Any:
        lib = self._lib
        model_params = lib.llama_model_default_params()
        model_params.n_gpu_layers = 0
        model_params.use_extra_bufts = extra_buffers
        model = lib.llama_model_load_from_file(str(path).encode("utf-8"), model_params)
        from memcli.models import llama_lib

        llama_lib.raise_deferred_interrupt()  # a Ctrl-C during the load's log callback
        if not model:
            raise ModelError(f"llama.cpp cannot load {path}: not a model it can read")
        return model

    def close(self) -> None:
        """Free the batch, the context, then the model (llama.cpp's order)."""
        lib = getattr(self, "_lib", None)
        if lib is None:
            return
        if getattr(self, "_batch", None) is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        if getattr(self, "_embd_batch", None) is not None:
            lib.llama_batch_free(self._embd_batch)
            self._embd_batch = None
        if getattr(self, "_ctx", None) is not None:
            lib.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None) is not None:
            lib.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the bindings may be gone
            pass

    def tokenize(self, text: str, max_tokens: int) -> list[int]:
        """Token ids of text without special tokens, at most max_tokens of them."""
        if max_tokens <= 0:
            return []
        # Each WordPiece token covers at least one character in practice; cutting very long
        # input first keeps tokenizing a huge text cheap, and it is truncated anyway.
        raw = text[: max_tokens * 32].encode("utf-8", errors="replace")
        lib = self._lib
        room = max(len(raw) + 8, 16)
        tokens = (lib.llama_token * room)()
        n = lib.llama_tokenize(self._vocab, raw, len(raw), tokens, room, False, False)
        if n < 0:  # more tokens than room: -n is how many
            room = -n
            tokens = (lib.llama_token * room)()
            n = lib.llama_tokenize(self._vocab, raw, len(raw), tokens, room, False, False)
            if n < 0:
                raise ModelError("llama.cpp could not tokenize a text")
        return list(tokens[: min(n, max_tokens)])

    def _use_threads(self, n: int) -> None:
        if n != self._threads:
            self._lib.llama_set_n_threads(self._ctx, n, n)
            self._threads = n

    def run(self, seqs: Sequence[Sequence[int]], width: int, *, bulk: bool = False) -> np.ndarray:
        """Decode seqs (each at most n_ctx tokens) as separate sequences of one batch.

        Returns the first `width` floats of each sequence's pooled output, shape (n, width).
        The caller keeps the batch within n_ctx tokens and n_seq_max sequences. `bulk`: one
        decode of many (retain, reembed), on the thread count measured fastest lately.
        """
        out = np.empty((len(seqs), width), dtype=np.float32)
        if not seqs:
            return out
        from memcli.models import llama_lib

        lib = self._lib
        with self._lock:
            llama_lib.silence(lib)
            batch = self._batch
            n = 0
            for seq_id, ids in enumerate(seqs):
                if n + len(ids) > self._batch_size:
                    raise ModelError("a decode of more tokens than the context holds")
                for pos, token in enumerate(ids):
                    batch.token[n] = token
                    batch.pos[n] = pos
                    batch.seq_id[n][0] = seq_id
                    batch.n_seq_id[n] = 1
                    batch.logits[n] = True
                    n += 1
            batch.n_tokens = n
            if self._memory:
                lib.llama_memory_clear(self._memory, True)
            threads = self.chooser.next() if bulk else N_THREADS
            self._use_threads(threads)
            started = time.perf_counter()
            code = lib.llama_decode(self._ctx, batch)
            if bulk:
                self.chooser.record(threads, time.perf_counter() - started, n)
            batch.n_tokens = 0
            llama_lib.raise_deferred_interrupt()  # a Ctrl-C during llama.cpp's log callback
            if code != 0:
                raise ModelError(f"llama.cpp could not decode (llama_decode returned {code})")
            for i in range(len(seqs)):
                ptr = lib.llama_get_embeddings_seq(self._ctx, i)
                if not ptr:
                    raise ModelError("llama.cpp returned no pooled output for a sequence")
                out[i] = np.ctypeslib.as_array(ptr, shape=(width,))
        return out

    def run_inputs(self, inputs: np.ndarray, width: int) -> np.ndarray:
        """Decode one sequence given as its token embeddings (n_tokens x n_embd floats; the
        model adds positions and token types itself) instead of token ids; returns the first
        `width` floats of its pooled output. A model whose vocabulary is held elsewhere
        (models/e5_query.py) needs no tokenizer of llama.cpp's, which for a 250k-piece
        vocabulary costs seconds to build at every load."""
        from memcli.models import llama_lib

        inputs = np.ascontiguousarray(inputs, dtype=np.float32)
        n = len(inputs)
        if n == 0 or n > self._batch_size or inputs.shape[1] != self.n_embd:
            raise ModelError("token embeddings of the wrong shape for this model")
        lib = self._lib
        with self._lock:
            llama_lib.silence(lib)
            batch = getattr(self, "_embd_batch", None)
            if batch is None:
                batch = self._embd_batch = lib.llama_batch_init(self._batch_size, self.n_embd, 1)
            import ctypes

            ctypes.memmove(batch.embd, inputs.ctypes.data, inputs.nbytes)
            for pos in range(n):
                batch.pos[pos] = pos
                batch.seq_id[pos][0] = 0
                batch.n_seq_id[pos] = 1
                batch.logits[pos] = True
            batch.n_tokens = n
            if self._memory:
                lib.llama_memory_clear(self._memory, True)
            self._use_threads(N_THREADS)
            code = lib.llama_decode(self._ctx, batch)
            batch.n_tokens = 0
            llama_lib.raise_deferred_interrupt()
            if code != 0:
                raise ModelError(f"llama.cpp could not decode (llama_decode returned {code})")
            ptr = lib.llama_get_embeddings_seq(self._ctx, 0)
            if not ptr:
                raise ModelError("llama.cpp returned no pooled output for a sequence")
            return np.ctypeslib.as_array(ptr, shape=(width,)).copy()

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
        pooling = self._runner.pooling_type
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
        limit = meta.get(MAX_SEQ_KEY)
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
        bulk = len(texts) > 1
        for group in self._runner.pack([len(s) for s in seqs], self.token_budget):
            out[group] = self._runner.run([seqs[i] for i in group], self.dim, bulk=bulk)
        return finish_vectors(out, self.center)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for stored texts (passages), shape (len(texts), dim), rows of unit length;
        long texts truncated."""
        return self._embed_prepared([self.rules.passage(t) for t in texts])

    embed_passages = embed

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed_prepared([self.rules.query(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]


def finish_vectors(out: np.ndarray, center: np.ndarray | None) -> np.ndarray:
    """Pooled outputs (in place) as stored vectors: unit length, minus the model's centre
    (then unit length again) when it has one."""
    if center is not None:
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        out -= center
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


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
