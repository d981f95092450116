"""Entities: finding proper names in a fact and deciding which known entity a name refers to.

Extraction is a fast rule-based pass (no model): capitalised words and runs of them ("New
York", "Bank of America", "Dr. Smith", "Room 101", "iPhone 15 Pro"), minus the capitalised
words that are not names (sentence starters such as "The" / "Yesterday" / "Thanks", the pronoun
"I", weekdays and months). It runs on every retained fact, so it only looks at capitalised
tokens, found by one precompiled regex.

Resolution is pure (no database): the caller fetches candidates through :func:`candidate_keys`
and :func:`resolve_entity` picks the one to merge into, or None for a new entity. It follows the
reference scoring (0.5 x name similarity + 0.3 x co-occurrence + 0.2 x recency, merge above 0.6)
but first requires the names themselves to be similar, because a strong co-occurrence and
recency signal must never merge two different names: "Tigran" is not "Iran" (different first
letters) and "Room 101" is not "Room 102" (different numbers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from rapidfuzz.distance import DamerauLevenshtein

__all__ = [
    "AMBIGUITY_MARGIN",
    "COOCCURRENCE_WEIGHT",
    "MERGE_THRESHOLD",
    "MIN_NAME_SIMILARITY",
    "NAME_WEIGHT",
    "RECENCY_DAYS",
    "RECENCY_WEIGHT",
    "SUBSET_SIMILARITY",
    "EntityCandidate",
    "candidate_keys",
    "extract_entities",
    "name_similarity",
    "resolve_entity",
]

# --------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------

# Upper-case letters of the Latin, Greek and Cyrillic blocks (Python's re has no \p{Lu}).
_UPPER = "".join(c for c in map(chr, range(0x0530)) if c.isupper() and c.isalpha())
_LOWER = "".join(c for c in map(chr, range(0x0530)) if c.islower() and c.isalpha())

_TOKEN = re.compile(
    rf"(?<![\w'’&.-])(?:[{_UPPER}](?:\.[{_UPPER}])+\.?"  # U.S., U.K.
    rf"|[{_UPPER}][\w'’&-]*"  # Caroline, O'Brien, Jean-Luc, AT&T, LGBTQ, Caroline's
    rf"|[{_LOWER}]{{1,3}}[{_UPPER}][\w-]*)"  # iPhone, eBay, macOS
)
_SPACE = re.compile(r"[ \t]+")
_POSSESSIVE = re.compile(r"['’]s?$")
# What may sit between two capitalised words of one name: a space, or "of" / "of the" / "van"...
_JOINER = re.compile(
    r"[ \t]+(?:(?:of|of the|de|du|da|di|del|della|van|von|der|den|la|le|bin|al|&)[ \t]+)?"
)
# A number that belongs to the name before it ("Room 101", "iPhone 15") unless it counts
# something ("Caroline 3 times", "Paris 2 days ago").
_NUMBER_AFTER = re.compile(r"[ \t]+(\d{1,4}[A-Za-z]?)(?![\w/%])(?![.,:]\d)(?:[ \t]+([A-Za-z.]+))?")
_COUNTED = {
    "time", "times", "day", "days", "week", "weeks", "month", "months", "year", "years",
    "hour", "hours", "hr", "hrs", "minute", "minutes", "min", "mins", "second", "seconds",
    "am", "pm", "a.m.", "p.m.", "people", "persons", "kids", "children", "friends", "dollars",
    "euros", "pounds", "bucks", "percent", "miles", "km", "kg", "lbs", "points", "pages",
    "books", "things", "more", "or", "to", "out", "other", "others",
}  # fmt: skip

# Abbreviations whose dot neither ends the sentence nor the name ("Dr. Smith", "Mount St.").
_ABBREVIATIONS = {
    "dr", "mr", "mrs", "ms", "st", "mt", "ft", "jr", "sr", "prof", "gen", "col", "capt", "lt",
    "sgt", "rev", "fr", "inc", "co", "corp", "ltd", "vs", "ave", "rd", "blvd",
}  # fmt: skip

# Never an entity, wherever it stands.
_NEVER = {
    "i", "i'm", "i've", "i'll", "i'd", "ok", "okay", "lol", "omg", "btw", "fyi", "asap", "tbh",
    "imo", "idk", "ps", "am", "pm", "a.m.", "p.m.", "etc", "yesterday", "today", "tomorrow",
    "tonight", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    "tue", "tues", "thu", "thur", "thurs", "fri",
    "mondays", "tuesdays", "wednesdays", "thursdays", "fridays", "saturdays", "sundays",
}  # fmt: skip
_MONTH_NAMES = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
}  # fmt: skip
_MONTH_ABBREVIATIONS = {
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
}  # fmt: skip
_SEASONS = {"spring", "summer", "autumn", "fall", "winter"}
_SEASON_CONTEXT = {"last", "this", "next", "in", "during", "the", "of", "early", "late", "mid"}
_ARTICLES = {"the", "a", "an"}

# Capitalised sentence starters that are ordinary words. Only consulted for the first word of
# a sentence (mid-sentence capitals are names: "I met Will"), so a name that is also a common
# word ("Will", "Hope") is lost only at the start of a sentence. Two sources:
# - the English list of stopwords-iso (https://github.com/stopwords-iso, MIT; the
#   `stopwordsiso` package), a general list of 1,298 function and very common words, read
#   lazily by _starters(); its two-letter country and unit codes ("uk", "us", "cm") and the
#   given names it holds ("Bill", "Don", "Ed", "Al", "Jo", "Mo") are left out;
# - _OPENERS below: what such lists leave out and a chat often opens with, in general English:
#   interjections and fillers ("Haha", "Wow", "Congrats"), evaluative words ("Awesome",
#   "Sadly") and the common verbs of an imperative or a dropped subject ("Check", "Loved it").
#   Names that are common words ("Mark", "Grace", "Rose", "Max") are deliberately left out.
_OPENERS = frozenset(
    """
    a about above absolutely according across actually add added additionally after afterwards
    again against agree agreed ah aha ahh all almost alone along already also alternatively
    although always amazing an and another answer any anybody anyone anything anyway anyways
    apart apparently appreciate are aren't around as ask asked at attend aw awesome aww awww
    back bad based basically be beautiful became because become been before began behind being
    believe below beneath besides best bet better between beyond big both brainstorm brilliant
    bring busy but buy by bye call called came can can't cancel catch certainly challenges
    change check cheers cherish choose clearly come compare complete completed congrats
    congratulations consider continue cook cool could couldn't crazy create created currently
    cute date day days dear decide decided definitely describe description despite details did
    didn't different difficult do does doesn't doing don't done dunno each early easy eat eight
    either else email end enjoy enjoyed ensure enter especially even eventually ever every
    everybody everyone everything exactly example excellent except excited exciting explain
    explore fantastic feel feeling feels felt few finally find fine finish finished first
    firstly five fix follow for forget fortunately found four frankly free from fun funny
    further furthermore gave generally get gets getting give glad go goal goals goes going gone
    gonna good gorgeous got gotta grab great guess guys ha had hadn't haha hahaha happy hard
    has hasn't have haven't having he he'd he'll he's hello help hence her here here's hers
    herself hey hi him himself his hmm hmmm home honestly hope hoped hopefully how how'd how're
    how's how've however huge i i'd i'll i'm i've idea ideally ideas if imagine important
    importantly in include including incredible indeed initially insert inside instead
    interesting interestingly into is isn't it it'd it'll it's its itself join just keep kind
    knew know last lastly lately later learn learned least leave left less let let's lets like
    likewise list listen little live lol long look looking looks lots love loved lovely loving
    luckily lucky made make makes making many maybe me meanwhile meet met might mine miss mm
    mmm more moreover most mostly much must my myself nah naturally near nearly neat need
    needless neither never nevertheless new news next nice nine no nobody none nonetheless nope
    nor not note nothing notice now obviously of off often oh ok okay old on once one online
    only oof ooh oops open or other others otherwise ouch our ours ourselves out outside over
    overall part per perfect perhaps personally phew pick plan play played please plus point
    possibly pretty previously probably proud put question questions quite rather read reading
    ready really recently recommend regarding regardless remember remind reminds right sad
    sadly safe said same save saw say says second secondly see seeing seems seriously seven
    several shall share she she'd she'll she's should shouldn't show similarly simply since six
    skip so some somebody someone something sometimes soon sorry sounds speaking special
    specifically start started stay still stop such suddenly super sure surely sweet take
    taking talk talking tell ten terrible thank thankfully thanks that that's the their theirs
    them themselves then there there's therefore these they they'd they'll they're they've
    thing things think thinking third this those though three through thus time tip tips to
    today together too took totally tough toward towards tried true truly try trying twenty two
    typically ugh uh ultimately um under unfortunately unique unless until up upon us use used
    usually very via visit wait wake walk wanna want wanted was wasn't watch watching way we
    we'd we'll we're we've weird well went were weren't what what's whatever when whenever
    where wherever whether which while who who's whoa whoever whole whose why will wish with
    within without woah won't wonderful woo woohoo work working would wouldn't wow write y'all
    yay yea yeah yep yes yesterday yet yikes yo you you'd you'll you're you've your yours
    yourself yum yup
    """.split()
)
# Sentence-initial single words with these endings are ordinary words ("Running", "Excited",
# "Honestly"), except for these names.
# Two-letter words of the stopword list that are English words (the rest are codes).
_SHORT_WORDS = {
    "a", "i", "ah", "am", "an", "as", "at", "aw", "be", "by", "do", "eh", "go", "he", "hi",
    "if", "in", "is", "it", "me", "my", "no", "of", "oh", "ok", "on", "or", "ow", "so", "to",
    "up", "us", "we", "ye", "yo",
}  # fmt: skip
_STOPWORD_NAMES = {"bill", "don", "ed", "al", "jo", "mo"}


@lru_cache(maxsize=1)
def _starters() -> frozenset[str]:
    import stopwordsiso

    general = {
        w
        for w in stopwordsiso.stopwords("en")
        if w.isalpha() and (len(w) > 2 or w in _SHORT_WORDS) and w not in _STOPWORD_NAMES
    }
    return frozenset(general | _OPENERS)


def is_ordinary_word(word: str) -> bool:
    """Whether a capitalised word is an ordinary English word, not a name ("Date", "Answer",
    "Note", "You"): the sentence starters above. Names that are common words ("Will", "May")
    count as ordinary."""
    return word.lower() in _starters()


_ADVERB_ENDINGS = (
    "ally", "fully", "ously", "ively", "ately", "ingly", "edly", "ently", "antly", "ibly",
    "ably", "tly",
)  # fmt: skip
_NAMES_ENDING_LIKE_WORDS = frozenset(
    """
    beijing nanjing chongqing kunming irving sterling ewing browning king ming ling ahmed
    alfred jared mildred winifred manfred mohamed mohammed muhammed hamed saeed zayed javed
    naveed fareed waleed rasheed khaled
    """.split()
)


@dataclass
class _Run:
    start: int
    end: int
    name: str
    closed: bool = False  # ended by a possessive
    numbered: bool = False  # ends with a number: only a plain space may continue it


def _sentence_initial(text: str, start: int) -> bool:
    """Is the word at ``start`` the first of a sentence, line, quote or list item?"""
    j = start - 1
    while j >= 0 and text[j] in " \t\"“”‘’'([{*•·–—->#":
        j -= 1
    if j < 0:
        return True
    c = text[j]
    if c in "\n\r!?:…":
        return True
    if c == ".":
        k = j
        while k > 0 and text[k - 1].isalpha():
            k -= 1
        word = text[k:j]
        if word.lower() in _ABBREVIATIONS or (len(word) == 1 and word.isupper()):
            return False  # "Dr. Smith", "J. K. Rowling"
        return True
    return False


def _previous_word(text: str, start: int) -> str:
    j = start - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    k = j + 1
    while j >= 0 and (text[j].isalpha() or text[j] in "'’"):
        j -= 1
    return text[j + 1 : k].lower()


def extract_entities(text: str) -> list[str]:
    """Proper-noun spans of ``text``, deduplicated (case-insensitively) in order of appearance.

    Capitalised words and runs of them are names ("New York", "Bank of America", "Dr. Smith",
    "Mount St. Helens", "LGBTQ", "Room 101", "iPhone 15"); possessives and punctuation are
    stripped ("Caroline's" -> "Caroline"). Not names: the pronoun "I", weekdays, months and
    date words, and a capitalised first word of a sentence that is a common word ("The",
    "Hey", "Yesterday", "Thanks") or appears in lower case elsewhere in the text.
    """
    if not text or not any(c.isupper() for c in text):
        return []
    runs: list[_Run] = []
    run: _Run | None = None

    for m in _TOKEN.finditer(text):
        start, end = m.span()
        raw = m.group()
        possessive = False
        core = raw
        if _POSSESSIVE.search(core) and len(core) > 2:
            core = _POSSESSIVE.sub("", core)
            possessive = True
        core = core.rstrip("-&'’")
        if not core:
            continue
        end = start + len(core)
        low = core.lower().replace("’", "'")
        if end < len(text) and text[end] == "." and not possessive:
            if low in _ABBREVIATIONS or (len(core) == 1 and core.isupper()):
                core, low, end = core + ".", low + ".", end + 1

        # Is this word part of the current run?
        joins = (
            run is not None
            and not run.closed
            and (_JOINER if not run.numbered else _SPACE).fullmatch(text, run.end, start)
            is not None
            and "\n" not in text[run.end : start]
        )

        # Words that are never names break the run (a month may continue one: "Theresa May").
        if low in _NEVER or (low.rstrip(".") in _MONTH_ABBREVIATIONS and _digit_follows(text, end)):
            run = None
            continue
        if low in _MONTH_NAMES and not (joins and not _digit_follows(text, end)):
            run = None
            continue
        if low in _SEASONS and _previous_word(text, start) in _SEASON_CONTEXT:
            run = None
            continue

        if not joins:
            if low in _ARTICLES:
                run = None
                continue
            if _sentence_initial(text, start) and _is_starter(text, core, low, start, end):
                run = None
                continue
            run = _Run(start, end, core)
            runs.append(run)
        else:
            assert run is not None
            run.name = run.name + text[run.end : start] + core
            run.end = end
            run.numbered = False
        if possessive:
            run.closed = True
            continue
        # A number right after the word belongs to the name ("Room 101", "iPhone 15").
        num = _NUMBER_AFTER.match(text, run.end)
        if num and (num.group(2) or "").lower() not in _COUNTED:
            run.name = run.name + text[run.end : num.start(1)] + num.group(1)
            run.end = num.end(1)
            run.numbered = True

    out: list[str] = []
    seen: set[str] = set()
    for r in runs:
        name = _clean(r.name)
        key = name.casefold()
        if len(name) < 2 or key in seen or key.rstrip(".") in _ABBREVIATIONS:
            continue  # "Mr." alone is not a name
        if name.isupper() and all(w.lower() in _starters() for w in name.split()):
            continue  # shouting ("I LOVE IT"), not an acronym
        seen.add(key)
        out.append(name)
    return out


def _digit_follows(text: str, end: int) -> bool:
    j = end
    while j < len(text) and text[j] in " \t.,":
        j += 1
    return j < len(text) and text[j].isdigit()


def _is_starter(text: str, core: str, low: str, start: int, end: int) -> bool:
    """Is a sentence-initial capitalised word an ordinary word rather than a name?"""
    starters = _starters()
    if low in starters:
        return True
    if "'" in low and low.split("'")[0] in starters:
        return True  # "What've", "Must've", "How're"
    if len(low) >= 5 and low not in _NAMES_ENDING_LIKE_WORDS:
        if low.endswith(("ing", "ed")) or low.endswith(_ADVERB_ENDINGS):
            if _TOKEN.match(text, _skip_joiner(text, end)) is None:
                return True  # "Running is fun", "Excited to go!", "Honestly, ..."
    if core.isupper() and len(core) > 1:
        return False  # "LGBTQ support groups are ..."
    # Multi-word names ("New York is ...") are names.
    if _TOKEN.match(text, _skip_joiner(text, end)) is not None:
        return False
    # Judge by the word's other uses in the text: capitalised again mid-sentence, it is a name;
    # in lower case, an ordinary word ("Running is fun; I love running").
    lower_seen = False
    for m in re.finditer(rf"(?<![\w'’]){re.escape(core)}(?![\w])", text, re.IGNORECASE):
        if m.start() == start:
            continue
        if m.group()[0].isupper() and not _sentence_initial(text, m.start()):
            return False
        lower_seen = lower_seen or m.group()[0].islower()
    return lower_seen


def _skip_joiner(text: str, end: int) -> int:
    m = _JOINER.match(text, end)
    return m.end() if m else end


def _clean(name: str) -> str:
    name = " ".join(name.split())
    return name.strip(' ,;:!?"“”()[]{}')


# --------------------------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------------------------

#: Weight of name similarity in the merge score (reference design).
NAME_WEIGHT = 0.5
#: Weight of co-occurrence overlap: how many of the fact's other entities the candidate has
#: been seen with.
COOCCURRENCE_WEIGHT = 0.3
#: Weight of recency: 1 when the candidate was seen within RECENCY_DAYS, decaying after.
RECENCY_WEIGHT = 0.2
#: Merge when the score is above this (reference design).
MERGE_THRESHOLD = 0.6
#: Do better: no merge at all below this name similarity, whatever co-occurrence and recency
#: say (blocks "Tigran" -> "Iran": similar strings, different names).
MIN_NAME_SIMILARITY = 0.8
#: Similarity given to a one-word name that is a word of a longer name ("Caroline" vs
#: "Caroline Smith") or to names equal once titles are removed ("Dr. Smith" vs "Smith").
SUBSET_SIMILARITY = 0.9
#: Seen within this many days counts as fully recent; after it recency decays as days / age.
RECENCY_DAYS = 30.0
#: When the two best candidates score within this of each other the name is ambiguous
#: ("Caroline" with both "Caroline Smith" and "Caroline Jones" known): do not guess.
AMBIGUITY_MARGIN = 0.05

_TITLES = {"dr", "mr", "mrs", "ms", "miss", "prof", "sir", "dame", "mx"}
_CONNECTORS = {"of", "the", "de", "du", "da", "di", "del", "van", "von", "der", "den", "la", "le"}
_NORMALIZE_DROP = re.compile(r"['’.]")
_NORMALIZE_SPACE = re.compile(r"[\s\-_/]+")
_DIGITS = re.compile(r"\d+")


@dataclass
class EntityCandidate:
    """A known entity a new name might refer to, with what the scorer needs to know."""

    id: int
    name: str
    aliases: list[str] = field(default_factory=list)
    last_seen: datetime | None = None
    cooccurring: set[int] = field(default_factory=set)


def _normalize(name: str) -> str:
    """Lower-case, possessive, dots and apostrophes removed, hyphens as spaces."""
    s = name.casefold().strip()
    s = re.sub(r"['’]s$", "", s)
    s = _NORMALIZE_DROP.sub("", s)
    s = _NORMALIZE_SPACE.sub(" ", s)
    return s.strip(' ,;:!?"“”()[]{}')


def _token_similarity(a: str, b: str) -> float:
    if a == b:
        return 1.0
    if not a or not b or a[0] != b[0]:
        return 0.0
    return DamerauLevenshtein.normalized_similarity(a, b)


def _similarity(a: str, b: str) -> float:
    """Name similarity of two normalized names, 0 when a rule forbids a merge."""
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    if _DIGITS.findall(a) != _DIGITS.findall(b):
        return 0.0  # "Room 101" vs "Room 102", "iPhone 15" vs "iPhone 14"
    ta, tb = a.split(), b.split()
    sa = [t for t in ta if t not in _TITLES] or ta
    sb = [t for t in tb if t not in _TITLES] or tb
    if sa == sb:
        return SUBSET_SIMILARITY  # "Dr. Smith" vs "Smith"
    for one, many in ((sa, sb), (sb, sa)):
        if (
            len(one) == 1
            and len(many) > 1
            and one[0] in many
            and one[0] not in _CONNECTORS
            and not one[0].isdigit()
        ):
            return SUBSET_SIMILARITY  # "Caroline" vs "Caroline Smith"
    if a[0] != b[0]:
        return 0.0  # "Tigran" vs "Iran"
    if len(ta) == len(tb) > 1:
        # Word by word: "John Smith" vs "Jane Smith" share a surname, not a person.
        sims = [_token_similarity(x, y) for x, y in zip(ta, tb, strict=True)]
        if min(sims) < 0.5:
            return 0.0
        return sum(sims) / len(sims)
    whole = DamerauLevenshtein.normalized_similarity(a, b)
    if len(ta) > 1 or len(tb) > 1:
        reordered = DamerauLevenshtein.normalized_similarity(" ".join(sorted(ta)),
                                                             " ".join(sorted(tb)))  # fmt: skip
        whole = max(whole, reordered)
    return whole


def name_similarity(a: str, b: str) -> float:
    """How alike two names are, 0..1, after the merge-blocking rules.

    1.0 for equal names (ignoring case, dots, apostrophes, hyphens); 0.0 when the numbers in
    them differ ("Room 101" / "Room 102") or, for fuzzy matches, their first letters differ
    ("Tigran" / "Iran"); SUBSET_SIMILARITY for "Caroline" / "Caroline Smith"; otherwise the
    Damerau-Levenshtein similarity (word by word for names with the same number of words).
    """
    return _similarity(_normalize(a), _normalize(b))


def _recency(last_seen: datetime | None, now: datetime | None) -> float:
    if last_seen is None:
        return 0.0
    if now is None:
        return 0.5  # no clock to compare with: neutral
    age_days = (now - last_seen).total_seconds() / 86400.0
    if age_days <= RECENCY_DAYS:
        return 1.0
    return RECENCY_DAYS / age_days


def _cooccurrence(candidate: EntityCandidate, context_entity_ids: set[int]) -> float:
    if not context_entity_ids:
        return 0.0
    return len(candidate.cooccurring & context_entity_ids) / max(1, len(context_entity_ids))


def resolve_entity(
    name: str,
    candidates: list[EntityCandidate],
    context_entity_ids: set[int],
    now: datetime | None,
) -> int | None:
    """The id of the known entity ``name`` refers to, or None to create a new entity.

    An exact match (ignoring case) of the name or an alias always merges (the best scoring
    one if several). Otherwise a candidate needs a name similarity of at least
    MIN_NAME_SIMILARITY, and then NAME_WEIGHT x similarity + COOCCURRENCE_WEIGHT x overlap of
    its co-occurring entities with ``context_entity_ids`` (the other entities of the fact) +
    RECENCY_WEIGHT x recency above MERGE_THRESHOLD. When the best two are within
    AMBIGUITY_MARGIN the name is ambiguous and None is returned. ``now`` should be the time
    the name was mentioned; None makes recency neutral.
    """
    norm = _normalize(name)
    if not norm or not candidates:
        return None

    def context_score(c: EntityCandidate) -> float:
        return COOCCURRENCE_WEIGHT * _cooccurrence(
            c, context_entity_ids
        ) + RECENCY_WEIGHT * _recency(c.last_seen, now)

    exact = [c for c in candidates if any(_normalize(n) == norm for n in (c.name, *c.aliases))]
    if exact:
        return max(exact, key=context_score).id

    scored: list[tuple[float, int]] = []
    for c in candidates:
        sim = max(_similarity(norm, _normalize(n)) for n in (c.name, *c.aliases))
        if sim < MIN_NAME_SIMILARITY:
            continue
        score = NAME_WEIGHT * sim + context_score(c)
        if score > MERGE_THRESHOLD:
            scored.append((score, c.id))
    if not scored:
        return None
    scored.sort(key=lambda s: -s[0])
    if len(scored) > 1 and scored[0][0] - scored[1][0] < AMBIGUITY_MARGIN:
        return None
    return scored[0][1]


def candidate_keys(name: str) -> list[str]:
    """Cheap lower-case keys to index entities by, so candidates are fetched without a scan.

    The normalized full name, each word of 3+ letters (so "Caroline" finds "Caroline Smith"),
    and for one-word names of 5+ letters "~" plus the name and each one-letter deletion of
    it, so a one-edit typo ("Carolin", "Caorline") shares a key with the right entity. Index
    an entity under the keys of its name and of each alias; look up with the keys of the new
    name.
    """
    norm = _normalize(name)
    if not norm:
        return []
    keys = [norm]
    tokens = norm.split()
    stripped = [t for t in tokens if t not in _TITLES]
    if stripped and stripped != tokens:
        keys.append(" ".join(stripped))
    keys.extend(t for t in tokens if len(t) >= 3 and t not in _TITLES and t not in _CONNECTORS)
    if len(tokens) == 1 and len(norm) >= 5 and not any(ch.isdigit() for ch in norm):
        keys.append("~" + norm)
        keys.extend("~" + norm[:i] + norm[i + 1 :] for i in range(len(norm)))
    return list(dict.fromkeys(keys))
