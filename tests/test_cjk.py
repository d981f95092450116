"""Chinese, Japanese and Korean memories end to end: script detection, the embedder a bank gets
with no flags, keyword search over CJK, entity extraction that invents nothing, and fusion that
weighs down an arm known to be weak for the query."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli import entities, fts, lang
from memcli.cli import app
from memcli.models import choice
from memcli.models.embedder import KNOWN_RULES
from memcli.recall import fusion
from memcli.retain import RetainItem
from memcli.settings import RecallSettings
from memcli.store import Store

runner = CliRunner()

ZH = [
    "我家的猫叫豆豆，是一只橘猫，今年三岁了。",
    "最近失眠，一直到凌晨两点才睡着，可能是咖啡喝多了。",
    "季度报告的截止日期改到1月31日了，别忘了。",
    "今天试了楼下新开的兰州拉面，牛肉给得很多，十八块一碗。",
]
JA = [
    "うちの犬の名前はモモで、柴犬の女の子です。",
    "ピアノ教室に通い始めた。先生は中村先生で、毎週水曜日の夜。",
]
KO = [
    "우리 집 고양이 이름은 나비이고, 하얀 페르시안 고양이다.",
    "드럼 학원에 등록했다. 선생님은 박 선생님이고 매주 토요일 오후 수업.",
]


def mem(db: Path, *args: str, env: dict | None = None):
    return runner.invoke(app, ["--db", str(db), *args], env={"MEM_EMBEDDER": None, **(env or {})})


def retain_items(db: Path, texts: list[str], *args: str):
    """Each text its own item (positional texts would be joined into one)."""
    jsonl = db.with_suffix(".jsonl")
    jsonl.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts))
    return mem(db, "retain", *args, "--jsonl", str(jsonl))


def bank_embedder(db: Path, bank: str = "default") -> str | None:
    with Store(db) as s:
        return s.vectors.bank_embedder(s.banks.require_bank(bank))[0]


# -- scripts -------------------------------------------------------------------------------


def test_scripts_and_cjk_share() -> None:
    assert [lang.script_of(c) for c in "猫かカ고a1 。"] == [
        "han",
        "kana",
        "kana",
        "hangul",
        "latin",
        None,
        None,
        None,
    ]
    assert lang.cjk_share("") == 0.0 and lang.cjk_share("Hello, world!") == 0.0
    assert lang.cjk_share("我家的猫") == 1.0
    # letters only: digits and punctuation say nothing; "Q3 预算" is 1 Latin letter of 3
    assert lang.cjk_share("Q3 预算 2024!") == pytest.approx(2 / 3)
    assert lang.is_mostly_cjk(ZH + JA + KO) and not lang.is_mostly_cjk(["Lunch at noon", "猫"])
    assert [lang.cjk_language(t) for t in (ZH[0], JA[0], KO[0], "Paris")] == [
        "zh",
        "ja",
        "ko",
        None,
    ]
    assert lang.cjk_language("漢字とかな") == "ja"  # Japanese writes Han too


def _slow_writing(text: str) -> str | None:
    counts = lang.script_counts(text)
    if not counts:
        return None
    return "cjk" if lang.cjk_share(text) >= lang.MOSTLY_CJK else "other"


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("我家的猫叫年糕", "cjk"),
        ("猫が好き", "cjk"),
        ("고양이", "cjk"),
        ("What is my cat called?", "other"),
        ("Q3 预算 2024!", "cjk"),  # 2 of its 3 letters
        ("王伟's wedding was lovely", "other"),
        ("12:30", None),
        ("🎉🎉", None),
        ("", None),
        ("\U00020000\U00020001 ab", "cjk"),  # CJK extension B, past the BMP
        ("ｱｲｳ", "cjk"),  # half-width katakana
    ],
)
def test_the_writing_of_a_text(text: str, written: str | None) -> None:
    assert lang.writing(text) == written == _slow_writing(text)


def test_the_quick_writing_agrees_with_the_letter_count_on_every_script() -> None:
    """lang.writing decides most texts by a regular expression over the CJK ranges: a
    range left out of it would count those letters as another script's."""
    import random

    rng = random.Random(7)
    points = [cp for cp in range(0x20, 0x40000, 7) if not 0xD800 <= cp <= 0xDFFF]
    for cp in points:
        ch = chr(cp)
        for text in (ch, ch * 3 + "ab", "abc" + ch):
            assert lang.writing(text) == _slow_writing(text), hex(cp)
    for _ in range(500):
        text = "".join(chr(rng.choice(points)) for _ in range(rng.randint(1, 12)))
        assert lang.writing(text) == _slow_writing(text), text


# -- the embedder a bank gets -----------------------------------------------------------------


def test_choice_rules() -> None:
    # One default for every language (issue 35): e5 for a new bank of any text.
    assert choice.for_texts(ZH).spec == "multilingual-e5-small"
    assert choice.for_texts(["Lunch is at noon.", "王伟 said hi"]).spec == "multilingual-e5-small"
    assert choice.for_bank(None, None).spec == choice.DEFAULT_NAME == "multilingual-e5-small"
    assert choice.for_bank(None, "e5", ["English"]).reason == "explicit"
    assert choice.for_bank("multilingual-e5-small", None, ["English"]).spec == (
        "multilingual-e5-small"
    )
    # recorded by an older version as the converted file's stem
    assert choice.for_bank("all-MiniLM-L6-v2-53aa51172d14-f16", None).spec == "all-MiniLM-L6-v2"
    with pytest.raises(Exception, match="give that model.s file as the embedder"):
        choice.for_bank("my-own-model", None)


def test_new_chinese_bank_gets_e5_and_recall_uses_it_with_no_flags(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    rows = [{"text": t, "timestamp": f"2024-03-0{i + 1}T10:00:00"} for i, t in enumerate(ZH)]
    jsonl = tmp_path / "zh.jsonl"
    jsonl.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    r = mem(db, "retain", "--jsonl", str(jsonl))
    assert r.exit_code == 0, r.stderr
    assert "warning" not in r.stderr
    assert bank_embedder(db) == "multilingual-e5-small"
    r = mem(db, "recall", "我晚上睡不着", "--trace", "--limit", "1", "--format", "json")
    assert r.exit_code == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["results"][0]["text"] == ZH[1]
    assert obj["trace"]["embedder"]["name"] == "multilingual-e5-small"
    r = mem(db, "recall", "我晚上睡不着", "--trace")
    assert "embedder: multilingual-e5-small" in r.stdout
    # cross-lingual: an English question finds the Chinese memory
    r = mem(db, "recall", "what is my cat called", "--limit", "1", "--format", "json")
    assert json.loads(r.stdout)["results"][0]["text"] == ZH[0]
    # stats shows the bank's embedder
    r = mem(db, "stats")
    assert "embedder multilingual-e5-small" in r.stdout


def test_new_english_bank_gets_e5(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    assert mem(db, "retain", "Lunch is at noon on Fridays.").exit_code == 0
    assert bank_embedder(db) == "multilingual-e5-small"
    r = retain_items(db, ZH[:2])  # Chinese into it: no warning, e5 reads it
    assert r.exit_code == 0 and "warning" not in r.stderr, r.stderr


def test_english_bank_keeps_minilm_and_warns_when_cjk_arrives(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    # A MiniLM bank, as versions before issue 35 made every English bank.
    assert mem(db, "retain", "--embedder", "minilm", "Lunch is at noon on Fridays.").exit_code == 0
    assert bank_embedder(db) == "all-MiniLM-L6-v2"
    r = retain_items(db, ZH[:2])
    assert r.exit_code == 0, r.stderr
    warning = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and "mem --bank default reembed --embedder e5" in warning[0]
    assert bank_embedder(db) == "all-MiniLM-L6-v2"  # a warning, not a silent switch
    # a mostly-English batch says nothing
    r = mem(db, "retain", "Met 王伟 for the Q3 budget review.")
    assert r.exit_code == 0 and "warning" not in r.stderr


def test_explicit_embedder_overrides_the_choice(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    r = mem(db, "--bank", "notes", "retain", "--embedder", "minilm", ZH[0])
    assert r.exit_code == 0, r.stderr
    assert bank_embedder(db, "notes") == "all-MiniLM-L6-v2"
    r = mem(db, "--bank", "en", "retain", "Lunch is at noon.", env={"MEM_EMBEDDER": "e5"})
    assert r.exit_code == 0, r.stderr
    assert bank_embedder(db, "en") == "multilingual-e5-small"
    # each bank is recalled with its own model, in one --batch
    batch = tmp_path / "q.jsonl"
    batch.write_text(
        json.dumps({"id": "a", "query": "猫叫什么", "bank": "notes"}, ensure_ascii=False)
        + "\n"
        + json.dumps({"id": "b", "query": "lunch time", "bank": "en"})
        + "\n"
    )
    r = mem(db, "recall", "--batch", str(batch), "--trace")
    assert r.exit_code == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    names = {o["id"]: o["trace"]["embedder"]["name"] for o in lines}
    assert names == {"a": "all-MiniLM-L6-v2", "b": "multilingual-e5-small"}
    r = mem(db, "retain", "--embedder", "no-such-model.gguf", "x")
    assert r.exit_code == 1 and r.stderr.startswith("mem: error: ")


# -- keyword search ------------------------------------------------------------------------


def test_query_terms_for_cjk() -> None:
    assert fts.query_terms("名字") == ["名", "字", "名字"]
    assert fts.query_terms("猫叫什么", "bigram") == ["猫叫", "叫什", "什么"]
    assert fts.query_terms("猫叫什么", "unigram") == ["猫", "叫", "什", "么"]
    assert fts.query_terms("猫叫什么", "trigram") == ["猫叫什", "叫什么"]
    # kana and Hangul are CJK runs too; Latin words around them stay words
    assert fts.query_terms("モモ和Mochi", "bigram") == ["モモ", "モ和", "mochi"]
    assert fts.query_terms("이름이 뭐야", "bigram") == ["이름", "름이", "뭐야"]
    with pytest.raises(ValueError):
        fts.query_terms("x", "jieba")
    # FTS5 syntax in a CJK query is plain text
    expr = fts.match_expression(fts.query_terms('猫" OR 狗* AND (鱼'))
    assert expr == '"猫" OR "狗" OR "鱼"'


def test_keyword_arm_finds_chinese_japanese_and_korean_words(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    assert retain_items(db, ZH + JA + KO, "--embedder", "minilm").exit_code == 0
    for query, expected in [
        ("兰州拉面多少钱", "兰州拉面"),
        ("失眠", "失眠"),
        ("モモの犬種", "柴犬"),
        ("ピアノの先生", "中村先生"),
        ("고양이 이름이 뭐야", "나비"),
        ("드럼 선생님", "박 선생님"),
        ('"截止日期" AND *', "截止日期"),
    ]:
        r = mem(db, "recall", query, "--arms", "keyword", "--limit", "1")
        assert r.exit_code == 0, r.stderr
        assert expected in r.stdout, (query, r.stdout)


def test_no_entities_invented_from_cjk_text() -> None:
    for text in ZH + JA + KO:
        assert entities.extract_entities(text) == [], text
    assert entities.extract_entities("Met 王伟 and Maya Chen in 東京") == ["Maya Chen"]


# -- fusion weights --------------------------------------------------------------------------


def test_fusion_weights_drop_the_weak_arm_for_a_cjk_query() -> None:
    s = RecallSettings()
    en, multi = KNOWN_RULES["all-MiniLM-L6-v2"], KNOWN_RULES["multilingual-e5-small"]
    same, reason = fusion.query_weights(s.score_weights, "where is the kayak", en, s)
    assert same == s.score_weights and reason is None
    weights, reason = fusion.query_weights(s.score_weights, "我的猫叫什么", en, s)
    assert weights["semantic"] == pytest.approx(s.cjk_weak_embedder_factor)
    assert weights["keyword"] == s.score_weights["keyword"] and "English-only" in reason
    weights, reason = fusion.query_weights(s.score_weights, "我的猫叫什么", multi, s)
    assert weights["semantic"] == s.score_weights["semantic"]
    assert weights["keyword"] == pytest.approx(s.cjk_keyword_factor)
    # a half-CJK query moves half as far; an embedder of unknown languages changes nothing
    weights, _ = fusion.query_weights(s.score_weights, "cat 猫", en, s)
    assert weights["semantic"] == pytest.approx(1 - 0.25 * (1 - s.cjk_weak_embedder_factor))
    unknown = type(en)()
    assert fusion.query_weights(s.score_weights, "我的猫", unknown, s)[1] is None


def test_trace_shows_the_weights_used(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    assert retain_items(db, ZH, "--embedder", "minilm").exit_code == 0
    r = mem(db, "recall", "猫叫什么名字", "--trace")
    assert r.exit_code == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("fusion weights:"))
    assert "semantic 0.25" in line and "English-only embedder" in line
    r = mem(db, "recall", "猫叫什么名字", "--format", "json", "--trace")
    trace = json.loads(r.stdout)["trace"]
    assert trace["fusion_weights"]["semantic"] == pytest.approx(0.25)
    assert trace["embedder"]["languages"] == "en"


# -- dates -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,start,end",
    [
        ("2024年4月1日开始戒咖啡", "2024-04-01", "2024-04-02"),
        ("2024년 4월 1일", "2024-04-01", "2024-04-02"),
        ("2024年3月的账单", "2024-03-01", "2024-04-01"),
        ("上周三我做了什么？", "2024-04-03", "2024-04-04"),  # 2024-04-14 is a Sunday
        ("上个星期五", "2024-04-05", "2024-04-06"),
        ("上周一起吃饭", "2024-04-01", "2024-04-08"),  # 一起 is "together", not Monday
        ("先週の土曜日は何をした？", "2024-04-06", "2024-04-07"),
        ("来週", "2024-04-15", "2024-04-22"),
        ("다음 주", "2024-04-15", "2024-04-22"),
        ("지난주 금요일에", "2024-04-05", "2024-04-06"),
        ("지난 수요일", "2024-04-10", "2024-04-11"),
        ("昨天", "2024-04-13", "2024-04-14"),
        ("어제", "2024-04-13", "2024-04-14"),
        ("下个月", "2024-05-01", "2024-06-01"),
        ("去年", "2023-01-01", "2024-01-01"),
        ("3天前", "2024-04-11", "2024-04-12"),
        ("三个月前", "2024-01-01", "2024-02-01"),
        ("2週間前", "2024-03-25", "2024-04-01"),
        ("3일 전", "2024-04-11", "2024-04-12"),
    ],
)
def test_cjk_dates(text: str, start: str, end: str) -> None:
    from datetime import datetime

    from memcli.timeparse import extract_fact_time, parse_query_window

    now = datetime(2024, 4, 14, 10)
    for span in (parse_query_window(text, now), extract_fact_time(text, now)):
        assert span is not None, text
        assert (span.start.date().isoformat(), span.end.date().isoformat()) == (start, end)


def test_numbers_without_calendar_words_are_not_dates() -> None:
    from datetime import datetime

    from memcli.timeparse import parse_query_window

    now = datetime(2024, 4, 14)
    for text in (
        "地铁二号线",
        "十八块一碗",
        "我们有3个人",
        "5층에 있다",
        "2024个苹果",
        "日本の会社",
    ):
        assert parse_query_window(text, now) is None, text


def test_temporal_arm_runs_for_a_chinese_query(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    rows = [
        {"text": "给爸爸转了五千块做手术的费用。", "timestamp": "2024-04-03T13:20:00"},
        {"text": "参加了王伟的订婚宴。", "timestamp": "2024-04-06T22:30:00"},
        {"text": "开始学吉他。", "timestamp": "2024-02-01T19:00:00"},
    ]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    assert mem(db, "retain", "--jsonl", str(jsonl)).exit_code == 0
    r = mem(db, "recall", "上周三我做了什么？", "--now", "2024-04-14T10:00:00", "--trace")
    assert r.exit_code == 0, r.stderr
    assert "time window: 2024-04-03" in r.stdout
    obj = json.loads(
        mem(
            db, "recall", "上周三我做了什么？", "--now", "2024-04-14T10:00", "--format", "json"
        ).stdout
    )
    assert obj["results"][0]["text"] == rows[0]["text"]


def test_a_character_most_memories_contain_is_no_keyword_term(store, remember, embedder) -> None:
    from dataclasses import replace

    from memcli.recall import RecallOptions, recall

    remember([RetainItem(text) for text in ZH])  # each has 的 or 了; one names the cat 豆豆
    opts = RecallOptions(arms=("keyword",))

    def terms(**settings):
        s = replace(RecallSettings(), **settings)
        result = recall(store, "default", "我的猫叫什么", opts, embedder=embedder, settings=s)
        return result.arms["keyword"].notes["terms"], result.results[0].fact.text

    kept, top = terms()  # a small store: below the count, every character stays
    assert "的" in kept and top == ZH[0]
    # 的 is in 4 of the 4 facts' rows (text or lead-in), 猫 in 2: a limit of 2.4
    kept, top = terms(keyword_cjk_char_min_count=1, keyword_cjk_char_max_share=0.6)
    assert "的" not in kept and "猫" in kept and "我的" in kept and top == ZH[0]
    kept, _ = terms(keyword_cjk_char_min_count=1, keyword_cjk_char_max_share=1.0)
    assert "的" in kept


@pytest.mark.parametrize(
    "now", ["0001-01-01T00:00:00", "0001-01-03T12:00:00", "9999-12-31T23:00:00"]
)
@pytest.mark.parametrize(
    "text",
    [
        "9999年12月31日",
        "10000年1月1日",
        "0000年1月1日",
        "9999年12月",
        "明年",
        "去年",
        "昨天",
        "明天",
        "上周",
        "下周三",
        "작년",
        "昨日",
        "3年前",
        "3天后",
        "下个月",
        "12月31日",
    ],
)
def test_cjk_dates_at_the_ends_of_the_calendar_are_no_dates_not_errors(text: str, now: str) -> None:
    """A CJK date off the calendar (year 0 or 10000, a day past 9999-12-31) is no date, as
    in the English parser: it raised OverflowError or ValueError from recall and retain."""
    from datetime import datetime

    from memcli.timeparse import extract_fact_time, parse_query_window

    anchor = datetime.fromisoformat(now)
    for span in (parse_query_window(text, anchor), extract_fact_time(text, anchor)):
        assert span is None or span.start <= span.end


def test_a_cjk_date_off_the_calendar_stores_the_whole_import(tmp_path: Path) -> None:
    """Line 71 of an import named 9999-12-31: the import failed after its first 64 items
    were committed. Now every item is stored, and a recall naming that day answers."""
    lines = [json.dumps({"text": f"note number {i}"}) for i in range(70)]
    lines.append(json.dumps({"text": "证件有效期至9999年12月31日。"}, ensure_ascii=False))
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp_path / "s.db"
    runner = CliRunner()
    out = runner.invoke(app, ["--db", str(db), "retain", "--jsonl", str(src)])
    assert out.exit_code == 0, out.output
    store = Store(db, create=False)
    try:
        assert store.facts.fact_count() == 71
    finally:
        store.close()
    for query, now in (
        ("9999年12月31日", "2026-01-01"),
        ("明年", "9999-12-31"),
        ("去年", "0001-01-01"),
    ):
        out = runner.invoke(app, ["--db", str(db), "recall", query, "--now", now])
        assert out.exit_code == 0, (query, out.output)
        assert "Error" not in out.output and "unexpected" not in out.output
