"""How `mem` finds names in a fact and decides which known entity a name refers to."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memcli import entities
from memcli.entities import (
    EntityCandidate,
    candidate_keys,
    extract_entities,
    name_similarity,
    resolve_entity,
)

NOW = datetime(2023, 5, 8, 13, 56)
RECENT = NOW - timedelta(days=3)
LONG_AGO = NOW - timedelta(days=365)

# --------------------------------------------------------------------------------------------
# extract_entities
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # names and multiword names
        ("Caroline went to New York with Melanie.", ["Caroline", "New York", "Melanie"]),
        ("Theresa May spoke at the Bank of America.", ["Theresa May", "Bank of America"]),
        ("I watched the Lord of the Rings.", ["Lord of the Rings"]),
        ("She works at AT&T and Procter & Gamble.", ["AT&T", "Procter & Gamble"]),
        ("We visited the U.S. and Jean-Luc came too.", ["U.S.", "Jean-Luc"]),
        ("José and Zoë flew to Ørsted.", ["José", "Zoë", "Ørsted"]),
        # acronyms
        ("Hey Mel! I went to the LGBTQ support group yesterday.", ["Mel", "LGBTQ"]),
        ("OK so NASA called.", ["NASA"]),
        # titles and abbreviations keep their dots and do not end the sentence
        ("Yesterday I met Dr. Smith near Mount St. Helens.", ["Dr. Smith", "Mount St. Helens"]),
        ("I read The Hobbit by J. R. R. Tolkien.", ["Hobbit", "J. R. R. Tolkien"]),
        ("Mr. and Mrs. Smith came.", ["Mrs. Smith"]),
        # numbers that belong to the name, and numbers that count something
        (
            "Caroline's mom lives in Room 101 of the Grand Hotel.",
            ["Caroline", "Room 101", "Grand Hotel"],
        ),
        ("I bought an iPhone 15 Pro.", ["iPhone 15 Pro"]),
        ("Windows 11 is out.", ["Windows 11"]),
        ("I met Caroline 3 times in Paris.", ["Caroline", "Paris"]),
        # possessives and punctuation are stripped
        ("Melanie's kids love Caroline's dog.", ["Melanie", "Caroline"]),
        ('"Wow," said James.', ["James"]),
        # sentence starters, pronouns and dates are not names
        ("The sun was out on Sunday and Caroline came by.", ["Caroline"]),
        ("Yesterday Caroline called.", ["Caroline"]),
        ("Thanks, Melanie! That sounds great.", ["Melanie"]),
        ("I'm going to Paris in March 2023.", ["Paris"]),
        ("Last Summer we went to Spain.", ["Spain"]),
        ("On Monday, May 8 I met Jan.", ["Jan"]),
        ("Caroline: Hey Mel, how are you?", ["Caroline", "Mel"]),
        ("Sure! Caroline and I will go.", ["Caroline"]),
        # chat openers: common words, -ing / -ed words, adverbs, contractions
        ("Sounds great, Jon!", ["Jon"]),
        ("Honestly, Caroline was right.", ["Caroline"]),
        ("Excited to see Melanie!", ["Melanie"]),
        ("What've you been up to, Gina?", ["Gina"]),
        ("Beijing was amazing.", ["Beijing"]),  # a known name with a word-like ending
        ("Caroline sent Melanie a pic on Fri.", ["Caroline", "Melanie"]),
        # a capitalised first word that also appears in lower case is an ordinary word
        ("Running is fun. I love running.", []),
        # "Will" starts a question but is a name mid-sentence
        ("Will you come?", []),
        ("My friend Will is coming.", ["Will"]),
        # deduplicated case-insensitively, first spelling kept
        ("Caroline met CAROLINE and caroline.", ["Caroline"]),
        # shouting is not an acronym
        ("I LOVE IT", []),
        ("no capitals here at all", []),
        ("", []),
    ],
)
def test_extract_entities(text, expected):
    assert extract_entities(text) == expected


def test_extract_entities_is_fast():
    import time

    text = "Yesterday Caroline went to the LGBTQ support group in New York with Dr. Smith."
    t0 = time.perf_counter()
    for _ in range(2000):
        extract_entities(text)
    assert time.perf_counter() - t0 < 0.5  # about 10 us each on a laptop


# --------------------------------------------------------------------------------------------
# name_similarity: the merge-blocking rules
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("New York", "new york", 1.0),  # case does not matter
        ("Jean-Luc", "Jean Luc", 1.0),  # nor hyphens or dots
        ("Tigran", "Iran", 0.0),  # first letters differ: never a fuzzy match
        ("Room 101", "Room 102", 0.0),  # numbers differ
        ("iPhone 15", "iPhone 14", 0.0),
        ("Apollo 13", "Apollo", 0.0),
        ("Caroline", "Caroline Smith", entities.SUBSET_SIMILARITY),  # a word of a longer name
        ("Smith", "Caroline Smith", entities.SUBSET_SIMILARITY),
        ("Dr. Smith", "Smith", entities.SUBSET_SIMILARITY),  # equal without the title
        ("John Smith", "Jane Smith", 0.0),  # word by word: different first names
        ("Carolin", "Caroline", 0.875),  # one letter missing of eight
        ("Melanie", "Melanei", pytest.approx(6 / 7)),  # a swap counts as one edit
    ],
)
def test_name_similarity(a, b, expected):
    assert name_similarity(a, b) == expected


@pytest.mark.parametrize(
    ("a", "b"),
    [("Jon", "John"), ("Austria", "Australia"), ("Iran", "Iraq"), ("Tim", "Tom")],
)
def test_similar_looking_names_stay_below_the_merge_minimum(a, b):
    assert name_similarity(a, b) < entities.MIN_NAME_SIMILARITY


# --------------------------------------------------------------------------------------------
# resolve_entity
# --------------------------------------------------------------------------------------------


def candidate(id, name, aliases=(), last_seen=RECENT, cooccurring=()):
    return EntityCandidate(id, name, list(aliases), last_seen, set(cooccurring))


def test_defaults_follow_the_reference_design():
    assert entities.NAME_WEIGHT == 0.5
    assert entities.COOCCURRENCE_WEIGHT == 0.3
    assert entities.RECENCY_WEIGHT == 0.2
    assert entities.MERGE_THRESHOLD == 0.6
    assert entities.MIN_NAME_SIMILARITY == 0.8


def test_exact_match_always_merges_even_when_old_and_unrelated():
    old = candidate(1, "Caroline", last_seen=datetime(2010, 1, 1))
    assert resolve_entity("caroline", [old], set(), NOW) == 1


def test_alias_match_merges():
    mel = candidate(7, "Melanie", aliases=["Mel"])
    assert resolve_entity("MEL", [mel], set(), NOW) == 7


def test_no_candidates_means_a_new_entity():
    assert resolve_entity("Caroline", [], set(), NOW) is None


def test_tigran_is_not_iran_however_strong_the_context():
    iran = candidate(1, "Iran", cooccurring={10, 11})
    assert resolve_entity("Tigran", [iran], {10, 11}, NOW) is None


def test_room_101_is_not_room_102():
    room = candidate(1, "Room 102", cooccurring={10})
    assert resolve_entity("Room 101", [room], {10}, NOW) is None


def test_first_name_merges_into_recent_full_name():
    # 0.5 x 0.9 + 0.2 x 1 (seen 3 days ago) = 0.65 > 0.6
    assert resolve_entity("Caroline", [candidate(3, "Caroline Smith")], set(), NOW) == 3


def test_first_name_does_not_merge_into_old_unrelated_full_name():
    # 0.5 x 0.9 + 0.2 x 30/365 = 0.466
    old = candidate(3, "Caroline Smith", last_seen=LONG_AGO)
    assert resolve_entity("Caroline", [old], set(), NOW) is None


def test_co_occurrence_can_carry_an_old_entity():
    # 0.5 x 0.9 + 0.3 x 2/2 + 0.2 x 30/365 = 0.766
    old = candidate(3, "Caroline Smith", last_seen=LONG_AGO, cooccurring={5, 6})
    assert resolve_entity("Caroline", [old], {5, 6}, NOW) == 3


def test_a_typo_merges_only_with_context():
    # 0.5 x 0.875 + 0.2 = 0.6375 when recent; 0.4375 + 0.016 when a year old
    assert resolve_entity("Carolin", [candidate(4, "Caroline")], set(), NOW) == 4
    old = candidate(4, "Caroline", last_seen=LONG_AGO)
    assert resolve_entity("Carolin", [old], set(), NOW) is None


def test_an_ambiguous_name_is_not_guessed():
    both = [candidate(1, "Caroline Smith"), candidate(2, "Caroline Jones")]
    assert resolve_entity("Caroline", both, set(), NOW) is None
    # ... unless the context tells them apart
    both[1].cooccurring = {9}
    assert resolve_entity("Caroline", both, {9}, NOW) == 2


def test_without_a_clock_recency_is_neutral():
    # 0.5 x 0.875 + 0.2 x 0.5 = 0.5375: no merge on the name alone ...
    assert resolve_entity("Carolin", [candidate(4, "Caroline")], set(), None) is None
    # ... but shared company is enough: + 0.3
    friend = candidate(4, "Caroline", cooccurring={8})
    assert resolve_entity("Carolin", [friend], {8}, None) == 4


def test_the_best_exact_match_wins():
    stale = candidate(1, "Paris", last_seen=LONG_AGO)
    fresh = candidate(2, "paris", cooccurring={3})
    assert resolve_entity("Paris", [stale, fresh], {3}, NOW) == 2


# --------------------------------------------------------------------------------------------
# candidate_keys
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Caroline Smith", ["caroline smith", "caroline", "smith"]),
        ("Dr. Smith", ["dr smith", "smith"]),
        ("Room 101", ["room 101", "room", "101"]),
        ("Bank of America", ["bank of america", "bank", "america"]),
        ("Mel", ["mel"]),
        ("", []),
    ],
)
def test_candidate_keys(name, expected):
    assert candidate_keys(name) == expected


def test_a_one_word_name_also_gets_typo_keys():
    keys = candidate_keys("Caroline")
    assert keys[0] == "caroline"
    assert "~caroline" in keys and "~carolin" in keys


@pytest.mark.parametrize(
    ("new", "known"),
    [
        ("Caroline", "Caroline Smith"),  # a word of the full name
        ("Carolin", "Caroline"),  # a letter missing
        ("Carolyne", "Caroline"),  # a letter changed
        ("Caorline", "Caroline"),  # two letters swapped
        ("Dr. Smith", "Smith"),
    ],
)
def test_keys_find_the_candidates_resolution_would_merge(new, known):
    assert set(candidate_keys(new)) & set(candidate_keys(known))


def test_keys_do_not_connect_unrelated_names():
    assert not set(candidate_keys("Tigran")) & set(candidate_keys("Iran"))
