"""Real-model tests for memcli.models and memcli.tokens (no mocks, no network)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from memcli.models import ModelError
from memcli.models import convert as convert_mod
from memcli.models.convert import build_test_reranker, default_embedder_path
from memcli.models.embedder import Embedder
from memcli.models.load import load_embedder
from memcli.models.reranker import Reranker, load_reranker, read_gguf_header, to_probabilities
from memcli.tokens import count_tokens, truncate_to_tokens

REPO = Path(__file__).resolve().parents[1]
LONG_TEXT = "The quick brown fox jumps over the lazy dog near the riverbank. " * 400


@pytest.fixture(scope="session")
def minilm() -> Embedder:
    return load_embedder()


@pytest.fixture(scope="session")
def reranker_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_test_reranker(tmp_path_factory.mktemp("rerank") / "test-rerank.gguf", seed=7)


@pytest.fixture(scope="session")
def reranker(reranker_path: Path) -> Reranker:
    return load_reranker(reranker_path)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def _run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **env}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# ---- embedder -------------------------------------------------------------------------------


def test_embed_shape_dtype_and_unit_rows(minilm: Embedder) -> None:
    texts = ["a cat on a mat", "stock markets fell sharply", "", "  "]
    vecs = minilm.embed(texts)
    assert minilm.dim == 384
    assert vecs.shape == (4, 384)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert minilm.name == "all-MiniLM-L6-v2"  # the GGUF general.name, not the file stem


def test_paraphrase_closer_than_unrelated(minilm: Embedder) -> None:
    a, b, c = minilm.embed(
        [
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The new movie is awesome and the cinema was full.",
        ]
    )
    assert _cos(a, b) > 0.6  # sentence-transformers reference: 0.755
    assert _cos(a, c) < 0.2
    assert _cos(a, b) > _cos(a, c) + 0.4


def test_empty_list(minilm: Embedder) -> None:
    out = minilm.embed([])
    assert out.shape == (0, 384)
    assert out.dtype == np.float32


def test_long_text_truncated_not_crash(minilm: Embedder) -> None:
    vecs = minilm.embed([LONG_TEXT, "x" * 200_000, "short one"])
    assert vecs.shape == (3, 384)
    assert np.all(np.isfinite(vecs))
    # truncation keeps the start: 300 words are over the 256-token limit too, so they give
    # the same vector as the whole text
    head = " ".join(LONG_TEXT.split()[:300])
    assert _cos(vecs[0], minilm.embed([head])[0]) > 0.9999


def test_deterministic_and_batch_independent(minilm: Embedder) -> None:
    texts = [f"note {i}: the deploy of service {i % 7} failed at step {i % 3}" for i in range(40)]
    texts.append("a longer passage " * 30)
    first = minilm.embed(texts)
    second = minilm.embed(texts)
    np.testing.assert_array_equal(first, second)
    one_by_one = np.vstack([minilm.embed([t]) for t in texts[:5] + texts[-1:]])
    np.testing.assert_allclose(one_by_one, first[[0, 1, 2, 3, 4, -1]], atol=1e-4)


def test_load_embedder_cached(minilm: Embedder) -> None:
    assert load_embedder() is minilm
    assert load_embedder(default_embedder_path()) is minilm


def test_load_embedder_rejects_reranker(reranker_path: Path) -> None:
    with pytest.raises(ModelError, match="not an embedding model"):
        load_embedder(reranker_path)


def test_load_embedder_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        load_embedder(tmp_path / "nope.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_text("not a model\n")
    with pytest.raises(ModelError, match="not a GGUF"):
        load_embedder(junk)


# ---- conversion ------------------------------------------------------------------------------


def test_default_conversion_cached(minilm: Embedder) -> None:
    first = default_embedder_path()
    convert_mod._default_path = None  # drop the in-process memo: the disk caches must hold
    t0 = time.perf_counter()
    second = default_embedder_path()
    elapsed = time.perf_counter() - t0
    assert second == first
    assert elapsed < 0.1, f"cached lookup took {elapsed:.3f}s"
    assert first.name == f"all-MiniLM-L6-v2-{convert_mod.DEFAULT_EMBEDDER_SHA256[:12]}-f16.gguf"
    assert first.read_bytes()[:4] == b"GGUF"


def test_concurrent_first_conversion(tmp_path: Path) -> None:
    """Two processes converting into the same empty cache both succeed; no temp files remain."""
    code = """
        from memcli.models.convert import default_embedder_path
        print(default_embedder_path())
    """
    env = {"MEM_CACHE_DIR": str(tmp_path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            env={**os.environ, "PYTHONPATH": str(REPO), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    paths = {o[0].strip() for o in outs}
    assert len(paths) == 1
    models = tmp_path / "models"
    assert sorted(p.name for p in models.iterdir() if p.suffix == ".tmp") == []
    assert Path(paths.pop()).read_bytes()[:4] == b"GGUF"


# ---- reranker --------------------------------------------------------------------------------

QUERY = "what is the capital of France?"
DOCS = [
    "Paris is the capital and largest city of France.",
    "The cat sat on the mat.",
    "Berlin is the capital of Germany.",
    "Rust's borrow checker enforces memory safety at compile time.",
    "",
    LONG_TEXT,
]


def test_reranker_scores_deterministic_in_unit_range(reranker: Reranker) -> None:
    a = reranker.score(QUERY, DOCS)
    b = reranker.score(QUERY, DOCS)
    assert a == b
    assert len(a) == len(DOCS)
    assert all(0.0 <= s <= 1.0 for s in a)
    assert len(set(a)) > 1  # the head is seeded, not constant


def test_reranker_batching_matches_one_by_one(reranker: Reranker) -> None:
    docs = DOCS + [f"document number {i} about topic {i % 5}" for i in range(30)]
    batched = reranker.score(QUERY, docs)
    single = [reranker.score(QUERY, [d])[0] for d in docs]
    np.testing.assert_allclose(batched, single, atol=1e-4)


def test_reranker_empty_and_huge_query(reranker: Reranker) -> None:
    assert reranker.score(QUERY, []) == []
    scores = reranker.score(LONG_TEXT, [LONG_TEXT, "short"])
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores)


def test_load_reranker_cached(reranker: Reranker, reranker_path: Path) -> None:
    assert load_reranker(reranker_path) is reranker
    assert reranker.name == reranker_path.stem


def test_reranker_header_matches_gguf_reader(reranker_path: Path) -> None:
    import gguf

    meta, tensors = read_gguf_header(reranker_path)
    reader = gguf.GGUFReader(reranker_path)
    assert meta["bert.pooling_type"] == reader.get_field("bert.pooling_type").contents() == 4
    assert tensors == {t.name for t in reader.tensors}
    assert {"cls.weight", "cls.bias", "cls.output.weight", "cls.output.bias"} <= tensors


def test_load_reranker_rejects_embedding_model(minilm: Embedder) -> None:
    with pytest.raises(ModelError) as info:
        load_reranker(default_embedder_path())
    msg = str(info.value)
    assert "not a reranker" in msg and "RANK" in msg and "\n" not in msg


def test_load_reranker_rejects_text_and_missing(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("just some notes\nsecond line\n")
    with pytest.raises(ModelError) as info:
        load_reranker(text)
    assert "not a GGUF" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ModelError, match="not found"):
        load_reranker(tmp_path / "missing.gguf")
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 12)
    with pytest.raises(ModelError, match="damaged"):
        load_reranker(truncated)


def test_extreme_logits_do_not_overflow() -> None:
    assert to_probabilities([-1000.0, 1000.0, 3.0]) == pytest.approx(
        [0.0, 1.0, 1 / (1 + np.exp(-3.0))]
    )


# ---- tokens ----------------------------------------------------------------------------------


def test_count_tokens() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    assert count_tokens("<|endoftext|>") > 1  # special markers count as plain text


def test_truncate_to_tokens() -> None:
    text = "one two three four five six seven"
    assert truncate_to_tokens(text, 3) == "one two three"
    assert truncate_to_tokens(text, 100) == text
    assert truncate_to_tokens(text, 0) == ""
    cut = truncate_to_tokens("日本語のテキストです" * 5, 3)
    assert "\ufffd" not in cut and count_tokens(cut) <= 3


def test_tokens_offline_with_empty_user_cache_dir(tmp_path: Path) -> None:
    """A fresh process with an empty TIKTOKEN_CACHE_DIR and a dead proxy still counts tokens."""
    user_dir = tmp_path / "user-tiktoken"
    user_dir.mkdir()
    code = """
        import os
        from memcli.tokens import count_tokens, truncate_to_tokens
        assert count_tokens("hello world") == 2
        assert truncate_to_tokens("hello big world", 2) == "hello big"
        print(os.environ["TIKTOKEN_CACHE_DIR"])
    """
    dead = "http://127.0.0.1:9"
    result = _run_python(
        code,
        {
            "TIKTOKEN_CACHE_DIR": str(user_dir),
            "MEM_CACHE_DIR": str(tmp_path / "mem-cache"),
            "HTTP_PROXY": dead,
            "HTTPS_PROXY": dead,
            "http_proxy": dead,
            "https_proxy": dead,
        },
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(user_dir)  # the user's setting is restored
    assert (tmp_path / "mem-cache" / "tiktoken").is_dir()


def test_llama_cpp_prints_nothing(reranker_path: Path, tmp_path: Path) -> None:
    """mem's stdout is parsed by programs: loading, embedding, ranking and a failed load are
    all silent (llama.cpp logs to stderr by default)."""
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(default_embedder_path().read_bytes()[:2_000_000])  # header fine, data gone
    code = f"""
        from memcli.models import ModelError
        from memcli.models.load import load_embedder
        from memcli.models.reranker import load_reranker
        load_embedder().embed(["hello there", "x" * 5000])
        load_reranker({str(reranker_path)!r}).score("q", ["a", "b"])
        try:
            load_embedder({str(cut)!r})
        except ModelError:
            pass
        else:
            raise SystemExit(3)
    """
    result = _run_python(code, {})
    assert result.returncode == 0
    assert result.stdout == ""
    assert result.stderr == ""


# ---- embedder identity: the model's name and a hash of its weights, not its file name ------


def test_identity_is_general_name_and_sha256_of_the_gguf(minilm: Embedder) -> None:
    import hashlib

    assert minilm.name == "all-MiniLM-L6-v2"  # general.name inside the GGUF
    assert minilm.fingerprint == hashlib.sha256(minilm.path.read_bytes()).hexdigest()
    assert minilm.rules.english_only and minilm.rules.query_prefix == ""


def test_renamed_copy_is_the_same_model(minilm: Embedder, tmp_path: Path) -> None:
    copy = tmp_path / "my-renamed-model.gguf"
    copy.write_bytes(minilm.path.read_bytes())
    other = Embedder(copy)
    assert (other.name, other.fingerprint) == (minilm.name, minilm.fingerprint)
    np.testing.assert_allclose(other.embed(["a cat"]), minilm.embed(["a cat"]), atol=1e-6)


def test_fingerprint_hash_is_cached_by_path_size_and_mtime(minilm: Embedder, tmp_path) -> None:
    """A changed file (same path, new mtime) is hashed again; an unchanged one is not read."""
    import hashlib

    f = tmp_path / "weights.bin"
    f.write_bytes(b"one")
    assert convert_mod.sha256_cached(f) == hashlib.sha256(b"one").hexdigest()
    f.write_bytes(b"two")
    os.utime(f, ns=(1, 10**9))
    assert convert_mod.sha256_cached(f) == hashlib.sha256(b"two").hexdigest()
    # Same size and mtime as the record: the cached digest is trusted (that is the contract).
    f.write_bytes(b"TWO")
    os.utime(f, ns=(1, 10**9))
    assert convert_mod.sha256_cached(f) == hashlib.sha256(b"two").hexdigest()


def test_cached_conversion_is_verified_and_redone_when_damaged(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(convert_mod, "_default_path", None)
    first = default_embedder_path()
    sidecar = first.with_name(first.name + ".sha256")
    good = first.read_bytes()
    assert sidecar.read_text().strip() == __import__("hashlib").sha256(good).hexdigest()
    # Damage one byte of a tensor (the header stays valid): the hash no longer matches.
    damaged = bytearray(good)
    damaged[-100] ^= 0xFF
    first.write_bytes(bytes(damaged))
    monkeypatch.setattr(convert_mod, "_default_path", None)
    again = default_embedder_path()
    assert again == first and again.read_bytes() == good


def test_cli_accepts_a_renamed_copy_and_refuses_another_model(minilm, tmp_path) -> None:
    from typer.testing import CliRunner

    from memcli.cli import app
    from memcli.store import Store

    runner = CliRunner()
    db = tmp_path / "mem.db"
    copy = tmp_path / "copy-of-minilm.gguf"
    copy.write_bytes(minilm.path.read_bytes())

    def mem(*args: str, **env: str):
        return runner.invoke(app, ["--db", str(db), *args], env={"MEM_EMBEDDER": None, **env})

    # A MiniLM bank (the default is e5: named here).
    r = mem(
        "retain", "--embedder", "minilm", "--at", "2026-01-02", "The blue kayak is in the garage."
    )
    assert r.exit_code == 0, r.stderr
    # The same weights under another file name: retain and recall both work.
    r = mem("retain", "--embedder", str(copy), "Spare paddles hang above the kayak.")
    assert r.exit_code == 0, r.stderr
    r = mem("recall", "where is the kayak", "--embedder", str(copy))
    assert r.exit_code == 0, r.stderr
    assert "garage" in r.stdout
    with Store(db) as s:
        before = s.facts.fact_count()
    # Another model (e5) is refused in one line that names the fix; nothing is written.
    for args in (
        ("retain", "--embedder", "e5", "The red canoe is at the lake."),
        ("recall", "where is the kayak", "--embedder", "e5"),
    ):
        r = mem(*args)
        assert r.exit_code == 1, r.stdout
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("mem: error: "), r.stderr
        assert "multilingual-e5-small" in lines[0] and "reembed" in lines[0]
        assert "Traceback" not in r.stderr
    r = mem("recall", "where is the kayak", MEM_EMBEDDER="e5")
    assert r.exit_code == 1 and "reembed" in r.stderr
    with Store(db) as s:
        assert s.facts.fact_count() == before


def test_the_context_is_as_long_as_the_longest_input(minilm: Embedder) -> None:
    """MiniLM takes 256 tokens (sentence-transformers' max_seq_length, in the GGUF): its
    context is 256, not 512 (a cold start sets up the larger one ~20 ms slower)."""
    assert minilm.max_tokens == minilm._runner.n_ctx == 256


def test_a_ctrl_c_during_llama_log_callback_is_raised_when_the_decode_returns(embedder):
    """Ctrl-C while llama.cpp ran the log callback raised KeyboardInterrupt inside it, where
    ctypes printed "Exception ignored on calling ctypes callback" and the import went on to
    its end. The SIGINT handler (cli._on_sigint) leaves it for the decode to raise."""
    import types

    from memcli import cli
    from memcli.models import llama_lib

    embedder.embed(["warm"])  # the callback is installed
    in_callback = types.SimpleNamespace(f_code=llama_lib._quiet_code)
    elsewhere = types.SimpleNamespace(
        f_code=test_a_ctrl_c_during_llama_log_callback_is_raised_when_the_decode_returns.__code__
    )
    with pytest.raises(KeyboardInterrupt):
        cli._on_sigint(2, elsewhere)
    cli._on_sigint(2, in_callback)  # no raise inside the callback
    with pytest.raises(KeyboardInterrupt):
        embedder.embed(["the next decode raises it"])
    assert embedder.embed(["and only once"]).shape[0] == 1
