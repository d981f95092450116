"""How input text becomes facts (memcli/split.py), in every script: a long text is cut at
sentence ends into facts of at most fact_max_words words, none is longer, nothing is lost,
and a lead-in is cut to its first few words. Table-driven, as the splitter is pure."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memcli.retain import RetainItem
from memcli.split import first_words, split_text, word_count

# A comma-spliced Chinese paragraph of 399 characters with no full stop: chat and dictated
# notes often run on like this.
ZH_RUN_ON = "，".join(["我今天在公司开了三个会议午饭也没有吃上"] * 20)
# Korean separates words by spaces and ends sentences with ". " before a Hangul letter.
KO_SENTENCE = "오늘은 회사에서 정말 바쁜 하루였어요. 점심도 못 먹고 회의만 세 번 했어요."
KO_SENTENCES = " ".join([KO_SENTENCE] * 8)
# Japanese typed with half-width "!" and no space after it.
JA_HALF_WIDTH = "きょうは本当に疲れた!" * 40
# A Chinese text with no punctuation at all (a pasted transcript of speech).
ZH_UNBROKEN = "我们明天早上九点在公司门口集合然后一起坐大巴去山里" * 12


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("I went to the store.", 5),
        ("我家的猫叫豆豆", 3),  # seven Han characters: two count as one word
        ("오늘은 회사에서 바빴어요", 3),  # Korean is spaced: its words are counted by spaces
        ("うちの犬はモモ", 3),
        ("iPhone 很好用", 2),
        ("", 0),
    ],
)
def test_word_count(text: str, words: int) -> None:
    assert word_count(text) == words


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("zh-run-on", ZH_RUN_ON),
        ("ko-sentences", KO_SENTENCES),
        ("ja-half-width", JA_HALF_WIDTH),
        ("zh-unbroken", ZH_UNBROKEN),
        ("en", " ".join(["We drove to the coast on Saturday and walked for hours."] * 12)),
    ],
)
def test_no_fact_is_longer_than_the_limit_and_nothing_is_lost(name: str, text: str) -> None:
    _, facts = split_text(text, max_words=60)
    assert len(facts) > 1, name
    for fact in facts:
        assert 0 < word_count(fact.text) <= 60, (name, word_count(fact.text), fact.text)
    # Every letter is kept, in order (the splitter only normalises spaces).
    assert "".join("".join(f.text.split()) for f in facts) == "".join(text.split())


@pytest.mark.parametrize(
    ("name", "text", "ending"),
    [
        ("ko-sentences", KO_SENTENCES, "."),
        ("ja-half-width", JA_HALF_WIDTH, "!"),
        ("zh-run-on", ZH_RUN_ON, "，"),  # no sentence end: cut after a clause
    ],
)
def test_cjk_facts_end_where_a_sentence_or_clause_ends(name: str, text: str, ending: str) -> None:
    _, facts = split_text(text, max_words=60)
    for fact in facts[:-1]:
        assert fact.text.endswith(ending), (name, fact.text)
    assert facts[-1].text.endswith(text[-1])


@pytest.mark.parametrize("text", [ZH_RUN_ON, JA_HALF_WIDTH, ZH_UNBROKEN])
def test_unspaced_facts_are_the_text_as_written(text: str) -> None:
    """No space is put between Han or kana sentences that had none."""
    _, facts = split_text(text, max_words=60)
    assert all(f.text in text for f in facts)


@pytest.mark.parametrize(
    "text",
    [
        "Dr. Smith said the results were fine. We left at 3.30 p.m. and drove home.",
        "The U.S. team won. Version 3.5 ships next week.",
        "我们在3.5公里处休息。然后继续走。",
    ],
)
def test_short_texts_stay_one_fact(text: str) -> None:
    _, facts = split_text(text, max_words=60)
    assert [f.text for f in facts] == [" ".join(text.split())]


def test_a_long_english_text_is_cut_as_before() -> None:
    """English cuts are unchanged: sentence ends before a capital, whole sentences per fact."""
    text = " ".join(f"Sentence number {i} says something about the trip." for i in range(30))
    _, facts = split_text(text, max_words=60)
    assert all(f.text.endswith(".") for f in facts)
    assert [word_count(f.text) for f in facts] == [56, 56, 56, 56, 16]


@pytest.mark.parametrize(
    ("text", "n", "expected"),
    [
        ("one two three four", 2, "one two"),
        ("one two", 5, "one two"),
        ("好的，我会准时到。", 40, "好的，我会准时到。"),  # all of it, its full stop too
        ("我今天在公司开了三个会议", 2, "我今天在"),
        ("오늘은 회사에서 정말 바쁜 하루였어요", 2, "오늘은 회사에서"),
        (ZH_UNBROKEN, 40, ZH_UNBROKEN[:80]),
    ],
)
def test_first_words(text: str, n: int, expected: str) -> None:
    assert first_words(text, n) == expected


def test_a_long_chinese_message_is_stored_as_facts_and_cut_as_a_lead_in(store, remember) -> None:
    """Through retain into a real store: the run-on message becomes facts within the limit,
    and the reply after it embeds and indexes only its first 40 words as its lead-in (the
    whole message was the lead-in: with no spaces it was one "word")."""
    at = datetime(2026, 11, 1, 9, 0)
    remember(
        [
            RetainItem(text=ZH_UNBROKEN, context="王磊", timestamp=at, document_id="chat"),
            RetainItem(
                text="好的，我会准时到。",
                context="李娜",
                timestamp=at + timedelta(minutes=1),
                document_id="chat",
            ),
        ]
    )
    rows = store.core.conn.execute(
        "SELECT f.text, x.lead_in FROM facts f JOIN fact_fts x ON x.rowid = f.id ORDER BY f.id"
    ).fetchall()
    texts = [text for text, _ in rows]
    assert len(texts) == 4 and "".join(texts[:3]) == ZH_UNBROKEN
    assert all(word_count(text) <= 60 for text in texts)
    lead_in = rows[-1][1]
    assert lead_in.replace(" ", "") == "王磊:" + ZH_UNBROKEN[:80]
