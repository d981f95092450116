"""e5's query road (models/e5_query.py): the same token ids and vectors as the full GGUF,
from a GGUF with no vocabulary, this module's tokenizer and the 4-bit token table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memcli.models.e5_query import E5Embedder, UnigramTokenizer
from memcli.models.embedder import Embedder
from memcli.models.load import load_embedder

ROOT = Path(__file__).resolve().parent.parent

STRINGS = [
    "How much protein should I eat per day?",
    "我家的猫叫豆豆，是一只橘猫，今年三岁了。",
    "うちの犬の名前はモモで、柴犬の女の子です。",
    "우리 집 고양이 이름은 나비이고, 하얀 페르시안 고양이다.",
    "ＡＢＣ全角テキスト１２３と半角ｶﾀｶﾅ",
    "Meeting with 王伟 about the Q3 budget 🎉🎉 then 회의 at 3pm",
    "  spaces\tand\nnewlines   everywhere  ",
    "a <mask> token, \u2581 a metaspace and a lone combining mark \u0301",
    "x" * 700,  # longer than the model takes: cut as the full road cuts it
    "",
]


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    model = load_embedder("e5")
    assert isinstance(model, E5Embedder)
    return model


@pytest.fixture(scope="module")
def full(e5: E5Embedder) -> Embedder:
    return Embedder(e5.path)


def dev_texts() -> list[str]:
    texts: list[str] = []
    for name in ("cjk-dev.jsonl", "cjk-chat-dev.jsonl"):
        for line in (ROOT / "bench" / "data" / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            texts.append(row.get("text") or row.get("query"))
    return texts


def test_token_ids_are_llama_cpps(e5: E5Embedder, full: Embedder) -> None:
    for text in STRINGS + dev_texts():
        for query in (True, False):
            assert e5.token_ids(text, query=query) == full.token_ids(text, query=query), text


def test_query_vectors_are_the_full_ggufs(e5: E5Embedder, full: Embedder) -> None:
    for text in STRINGS:
        fast = e5.embed_query(text)
        slow = full.embed_queries([text])[0]  # one text a decode, as the fast road
        assert float(fast @ slow) > 0.99999, text
        assert abs(float(np.linalg.norm(fast)) - 1.0) < 1e-5


def test_same_model_for_banks_and_passages_by_the_full_gguf(e5: E5Embedder, full: Embedder):
    assert e5.fingerprint == full.fingerprint and e5.name == full.name
    assert e5.dim == full.dim and e5.rules == full.rules
    assert np.array_equal(e5.center, full.center)
    texts = ["passages go through the full model", "第二段文字"]
    assert np.array_equal(e5.embed(texts), full.embed(texts))


def test_a_vocabulary_file_of_another_kind_is_refused(tmp_path: Path) -> None:
    from memcli.models import ModelError

    bad = tmp_path / "vocab.bin"
    bad.write_bytes(b"NOPE" + bytes(100))
    with pytest.raises(ModelError, match="not a vocabulary file"):
        UnigramTokenizer(bad)
