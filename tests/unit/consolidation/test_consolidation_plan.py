"""Consolidation: one plan of deletions that merges, resolves, prunes and caps a project's
memory, never writes a word the user did not say, and finds nothing left to do the second
time. Shown by example and by property."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
import random

from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from recall.domain.clock import stamp
from recall.domain.consolidation import (
    ConsolidationPlan,
    ConsolidationStep,
    apply_plan,
    plan_consolidation,
)
from recall.domain.memory import Category, MemoryEntry, Scope, Source
from recall.domain.same_meaning import opposed, when_said

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
CAP = 50
MIN_VALUE_CHARS = 12
MIN_CONFIDENCE = 0.6
EXPLICIT = Source.EXPLICIT
EXTRACTED = Source.EXTRACTED
CONSOLIDATED = Source.CONSOLIDATED


def entry(
    key: str,
    value: str,
    category: Category = Category.PREFERENCES,
    source: Source = EXPLICIT,
    confidence: float | None = None,
    days_ago: float = 10,
    **fields: object,
) -> MemoryEntry:
    at = stamp(NOW - timedelta(days=days_ago))
    return MemoryEntry.model_validate(
        {
            "key": key,
            "value": value,
            "category": category,
            "source": source,
            "confidence": confidence
            if confidence is not None
            else (1.0 if source == EXPLICIT else 0.8),
            "created_at": at,
            "updated_at": at,
            **fields,
        }
    )


def plan(entries: list[MemoryEntry], cap: int = CAP) -> ConsolidationPlan:
    return plan_consolidation(
        entries, NOW, cap=cap, min_value_chars=MIN_VALUE_CHARS, min_confidence=MIN_CONFIDENCE
    )


def survivors(entries: list[MemoryEntry], cap: int = CAP) -> list[str]:
    return sorted(e.key for e in apply_plan(entries, plan(entries, cap)))


def deleted(result: ConsolidationPlan) -> list[str]:
    return [action.deleted.key for action in result.actions]


def filler(
    count: int, source: Source = EXPLICIT, confidence: float | None = None
) -> list[MemoryEntry]:
    """Distinct, specific entries that no rule touches except the cap."""
    return [
        entry(f"topic_{n:03d}", f"a specific rule number {n}", source=source, confidence=confidence)
        for n in range(count)
    ]


# Merge


def test_tidy_memory_needs_no_plan() -> None:
    entries = [
        entry("tone", "warm and plainspoken", Category.BRAND),
        entry("header_color", "dark navy blue"),
        entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN),
    ]
    assert plan(entries).is_empty
    assert plan([]).is_empty


def test_one_rule_saved_twice_under_two_keys_is_merged_into_the_newer_word_for_word() -> None:
    # Given the chat model saved the same rule twice, both explicit
    older = entry("header_dark", "Use a dark header.", days_ago=5)
    newer = entry("dark_header", "dark header", days_ago=1)
    # When
    result = plan([older, newer])
    # Then the newer stays exactly as it was, and the reason names both keys
    assert [(a.step, a.deleted, a.kept) for a in result.actions] == [
        (ConsolidationStep.MERGE, older, newer)
    ]
    reason = result.actions[0].reason
    assert "'header_dark'" in reason and "'dark_header'" in reason
    assert reason.index("'header_dark'") < reason.index("into") < reason.index("'dark_header'")
    assert apply_plan([older, newer], result) == [newer]


def test_a_merge_keeps_the_explicit_entry_over_a_newer_extracted_one() -> None:
    explicit = entry("tone", "warm and plainspoken", Category.BRAND, days_ago=30)
    extracted = entry("brand_tone", "Warm and plainspoken.", Category.BRAND, EXTRACTED, days_ago=1)
    result = plan([explicit, extracted])
    assert [(a.deleted.key, a.kept) for a in result.actions] == [("brand_tone", explicit)]


def test_three_saves_of_one_rule_merge_into_one() -> None:
    entries = [
        entry("header_dark", "dark header", days_ago=3),
        entry("dark_header", "Dark header!", days_ago=2),
        entry("headers_dark", "a dark header", days_ago=1),
    ]
    result = plan(entries)
    assert {a.step for a in result.actions} == {ConsolidationStep.MERGE}
    assert survivors(entries) == ["headers_dark"]


def test_consolidation_keeps_the_users_own_words_over_an_extracted_copy() -> None:
    # Given the user's explicit preference and an extracted forbidden copy of the rule
    rule = entry(
        "no_stock_photos", "never use stock photos", Category.FORBIDDEN, EXTRACTED, days_ago=9
    )
    preference = entry("avoid_stock_photos", "Avoid stock photos.", days_ago=1)
    # When / Then: the user's words are never merged away into the copy, and the forbidden
    # copy, never deleted as a duplicate, stays as well; whichever way round they are read
    assert plan([rule, preference]).is_empty
    assert plan([preference, rule]).is_empty


def test_an_extracted_copy_of_an_explicit_rule_is_merged_into_it_whatever_its_age() -> None:
    mine = entry("stock_photos", "Don't use stock photos on product pages", days_ago=9)
    copy = entry(
        "no_stock_photos_product_pages", "never use stock photo on product page", source=EXTRACTED
    )
    result = plan([copy, mine])
    assert [(a.step, a.deleted, a.kept) for a in result.actions] == [
        (ConsolidationStep.MERGE, copy, mine)
    ]


def test_a_forbidden_entry_is_never_merged_away_into_a_preference_of_the_same_source() -> None:
    rule = entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN, days_ago=9)
    preference = entry("avoid_stock_photos", "Avoid stock photos.", days_ago=1)
    assert [(a.step, a.deleted, a.kept) for a in plan([preference, rule]).actions] == [
        (ConsolidationStep.MERGE, preference, rule)
    ]


def test_a_forbidden_rule_saved_twice_stays_twice() -> None:
    # Given one forbidden rule saved under two keys, in nearly the same words
    first = entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN, days_ago=9)
    second = entry("avoid_stock_photos", "Never use stock photos.", Category.FORBIDDEN, days_ago=1)
    # When / Then: neither is deleted, whichever way round they are read
    assert plan([first, second]).is_empty
    assert plan([second, first]).is_empty


def test_a_merge_deletes_the_preference_copy_of_a_forbidden_rule_and_no_forbidden_copy() -> None:
    # Given a rule saved twice as forbidden (one extracted) and once more as a preference
    rule = entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN, days_ago=9)
    again = entry(
        "avoid_stock_photos", "Never use stock photos.", Category.FORBIDDEN, EXTRACTED, days_ago=1
    )
    preference = entry("stock_photos", "Never use stock photos!", days_ago=0.5)
    entries = [rule, again, preference]
    # When
    result = plan(entries)
    # Then only the preference goes, merged into a forbidden entry
    assert [(a.step, a.deleted) for a in result.actions] == [(ConsolidationStep.MERGE, preference)]
    assert result.actions[0].kept in (rule, again)
    assert survivors(entries) == ["avoid_stock_photos", "no_stock_photos"]


def test_the_same_short_value_under_unrelated_keys_is_not_merged() -> None:
    entries = [entry("header_color", "dark navy"), entry("header_font", "dark navy")]
    assert plan(entries).is_empty


# Resolve


@pytest.mark.parametrize("source", [EXPLICIT, EXTRACTED])
def test_a_contradiction_keeps_the_newer_value(source: Source) -> None:
    # Given
    older = entry("header_color", "dark navy blue", source=source, days_ago=20)
    newer = entry("header_colour", "light warm grey", source=source, days_ago=2)
    # When
    result = plan([older, newer])
    # Then
    assert [(a.step, a.deleted, a.kept) for a in result.actions] == [
        (ConsolidationStep.RESOLVE, older, newer)
    ]
    assert "newer" in result.actions[0].reason
    assert plan([newer, older]) == result


def test_a_rule_changed_to_a_new_value_under_a_new_key_keeps_the_newer_value() -> None:
    # Given "keep the header dark", later "keep the header light", saved under two keys
    dark = entry("header_dark", "Always keep the header dark", days_ago=5)
    light = entry("header_light", "Actually, always keep the header light", days_ago=1)
    # When
    result = plan([dark, light])
    # Then the newer value stands
    assert [(a.step, a.deleted, a.kept) for a in result.actions] == [
        (ConsolidationStep.RESOLVE, dark, light)
    ]


def test_a_changed_value_extracted_later_never_deletes_the_users_explicit_entry() -> None:
    dark = entry("header_dark", "Always keep the header dark", days_ago=5)
    light = entry("header_light", "keep the header light", source=EXTRACTED, days_ago=1)
    assert [(a.deleted, a.kept) for a in plan([dark, light]).actions] == [(light, dark)]


def test_two_things_with_one_value_are_both_kept() -> None:
    entries = [
        entry("header_dark", "Always keep the header dark", days_ago=5),
        entry("footer_dark", "Always keep the footer dark", days_ago=1),
    ]
    assert plan(entries).is_empty


def test_a_contradiction_written_at_the_same_moment_keeps_the_first_key() -> None:
    first = entry("header_color", "dark navy blue", days_ago=2)
    second = entry("header_colour", "light warm grey", days_ago=2)
    result = plan([second, first])
    assert [(a.deleted, a.kept) for a in result.actions] == [(second, first)]
    assert "same moment" in result.actions[0].reason


def test_a_background_entry_never_overrides_an_explicit_one() -> None:
    # Given the user's own older entry and a newer extracted contradiction
    explicit = entry("header_color", "dark navy", days_ago=20)
    extracted = entry("header_colour", "light grey", source=EXTRACTED, days_ago=1)
    # When
    result = plan([explicit, extracted])
    # Then the extracted entry goes
    assert [(a.deleted, a.kept) for a in result.actions] == [(extracted, explicit)]


def test_a_forbidden_entry_is_deleted_when_a_newer_entry_explicitly_contradicts_it() -> None:
    # Given "never use stock photos", then later "use stock photos for the blog"
    rule = entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN, days_ago=20)
    newer = entry("blog_images", "use stock photos for the blog", days_ago=2)
    # When
    result = plan([rule, newer])
    # Then
    assert [(a.step, a.deleted, a.kept) for a in result.actions] == [
        (ConsolidationStep.RESOLVE, rule, newer)
    ]
    assert "forbidden" in result.actions[0].reason


def test_a_forbidden_entry_stays_when_the_contradiction_is_not_newer() -> None:
    # Given a preference written at the same moment as the rule, or before it
    rule = entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN, days_ago=2)
    same_moment = entry("blog_images", "use stock photos for the blog", days_ago=2)
    older = entry("blog_images", "use stock photos for the blog", days_ago=3)
    # Then the rule stands; an older preference gives way to it
    assert rule not in [a.deleted for a in plan([rule, same_moment]).actions]
    assert [(a.deleted, a.kept) for a in plan([rule, older]).actions] == [(older, rule)]


def test_a_forbidden_entry_stays_when_a_newer_entry_on_its_subject_is_not_its_opposite() -> None:
    # Given a newer neutral preference with the same subject, and a newer stricter rule
    rule = entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN, days_ago=20)
    neutral = entry("stock_photos", "stock photos from unsplash", days_ago=1)
    stricter = entry("stock_photo", "no stock photos or clip art", Category.FORBIDDEN, days_ago=1)
    # Then nothing deletes the rule
    for newer in (neutral, stricter):
        assert rule not in [a.deleted for a in plan([rule, newer]).actions]


def test_an_entry_that_lost_a_contradiction_deletes_nothing_else() -> None:
    # Given a rule, a newer preference against it, and the newest word on that preference
    rule = entry("no_stock_imagery", "never use stock photos", Category.FORBIDDEN, days_ago=20)
    against = entry("stock_photo", "use stock photos for the blog", days_ago=5)
    newest = entry("stock_photos", "stock photos only from unsplash", days_ago=1)
    # When
    result = plan([rule, against, newest])
    # Then the preference gives way to the newest, and the rule stands
    assert [(a.deleted, a.kept) for a in result.actions] == [(against, newest)]


def test_an_extracted_rule_is_as_old_as_the_message_it_was_read_from() -> None:
    # Given "never use stock photos" said 20 days ago but extracted only yesterday, and
    # the user's explicit reversal written 5 days ago
    said = stamp(NOW - timedelta(days=20))
    rule = entry(
        "no_stock_photos", "never use stock photos", Category.FORBIDDEN, EXTRACTED, days_ago=1
    ).model_copy(update={"said_at": said})
    reversal = entry("stock_photos_blog", "use stock photos for the blog", days_ago=5)
    # When
    result = plan([rule, reversal])
    # Then the reversal, said later, stands and the old rule goes
    assert [(a.step, a.deleted, a.kept) for a in result.actions] == [
        (ConsolidationStep.RESOLVE, rule, reversal)
    ]


def test_of_two_extracted_values_the_one_said_later_stands_whenever_each_was_written() -> None:
    early = stamp(NOW - timedelta(days=9))
    late = stamp(NOW - timedelta(days=3))
    said_first = entry("header_color", "dark navy blue", source=EXTRACTED, days_ago=1)
    said_last = entry("header_colour", "light warm grey", source=EXTRACTED, days_ago=2)
    said_first = said_first.model_copy(update={"said_at": early})
    said_last = said_last.model_copy(update={"said_at": late})
    result = plan([said_first, said_last])
    assert [(a.deleted, a.kept) for a in result.actions] == [(said_first, said_last)]


def test_an_older_preference_gives_way_to_a_newer_forbidden_entry() -> None:
    preference = entry("stock_photos", "use stock photos", days_ago=20)
    rule = entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN, days_ago=1)
    result = plan([preference, rule])
    assert [(a.step, a.deleted, a.kept) for a in result.actions] == [
        (ConsolidationStep.RESOLVE, preference, rule)
    ]


# Prune


def test_a_background_value_under_the_minimum_length_is_pruned_and_one_at_it_is_kept() -> None:
    # Given 11 and 12 characters, extracted with good confidence
    short = entry("hero", "dark banner", source=EXTRACTED)
    enough = entry("footer", "light footer", source=EXTRACTED)
    assert (len(short.value), len(enough.value)) == (MIN_VALUE_CHARS - 1, MIN_VALUE_CHARS)
    # When
    result = plan([short, enough])
    # Then
    assert [(a.step, a.deleted) for a in result.actions] == [(ConsolidationStep.PRUNE, short)]
    assert "under 12 characters" in result.actions[0].reason


def test_an_extracted_entry_under_the_minimum_confidence_is_pruned_and_one_at_it_is_kept() -> None:
    at_minimum = entry("footer", "light grey footer", source=EXTRACTED, confidence=0.6)
    below = entry("header", "dark navy header", source=EXTRACTED, confidence=0.59)
    result = plan([at_minimum, below])
    assert deleted(result) == ["header"]
    assert "confidence 0.59" in result.actions[0].reason


def test_a_consolidated_entry_is_not_pruned_for_its_confidence() -> None:
    kept = entry("footer", "light grey footer", source=CONSOLIDATED, confidence=0.1)
    assert plan([kept]).is_empty


@pytest.mark.parametrize("value", ["OK!", "thing", "Stuff.", "thank you", "N/A"])
def test_a_generic_background_value_is_pruned(value: str) -> None:
    # Given a generic value, long enough not to be pruned for length alone
    vague = entry("note", value, source=CONSOLIDATED)
    # When
    result = plan([vague], cap=CAP)
    result_short = plan_consolidation(
        [vague], NOW, cap=CAP, min_value_chars=1, min_confidence=MIN_CONFIDENCE
    )
    # Then
    assert deleted(result) == ["note"]
    assert deleted(result_short) == ["note"]
    assert "says only" in result_short.actions[0].reason


def test_explicit_and_forbidden_entries_are_never_pruned_as_vague() -> None:
    entries = [
        entry("ack", "ok"),
        entry("hero", "dark"),
        entry("no_gifs", "no gifs", Category.FORBIDDEN, EXTRACTED, confidence=0.1),
        entry("stuff", "stuff", Category.FORBIDDEN, CONSOLIDATED),
    ]
    assert plan(entries).is_empty


def test_imported_entries_are_the_users_words_and_never_pruned_as_vague() -> None:
    # Given the user's own short rules, brought over by an import
    entries = [
        entry("tone", "warm", Category.BRAND, Source.IMPORTED),
        entry("currency", "EUR only", Category.CONTEXT, Source.IMPORTED, confidence=0.1),
        entry("ack", "ok", source=Source.IMPORTED),
    ]
    # When / Then
    assert plan(entries).is_empty


# Cap


def test_exactly_the_cap_is_kept() -> None:
    assert plan(filler(CAP, source=EXTRACTED)).is_empty


def test_one_over_the_cap_drops_exactly_the_least_useful_entry() -> None:
    # Given the cap of explicit entries and one extracted entry, all otherwise alike
    entries = [*filler(CAP), entry("guess", "a guessed but specific rule", source=EXTRACTED)]
    # When
    result = plan(entries)
    # Then
    assert [(a.step, a.deleted.key) for a in result.actions] == [(ConsolidationStep.CAP, "guess")]
    assert "over the cap of 50" in result.actions[0].reason


def test_the_cap_is_a_parameter() -> None:
    assert len(plan(filler(10), cap=9).actions) == 1
    assert plan(filler(10), cap=10).is_empty


def test_the_cap_drops_background_first_then_the_less_confident_then_the_older() -> None:
    # Given three extra entries beyond the cap, each losing on one criterion
    keep = filler(CAP - 2)
    candidates = [
        entry("explicit_rule", "an explicit specific rule", days_ago=100),
        entry("confident", "a confident extracted rule", source=EXTRACTED, confidence=0.9),
        entry("old_guess", "an older extracted rule", source=EXTRACTED, confidence=0.7, days_ago=9),
        entry("new_guess", "a newer extracted rule", source=EXTRACTED, confidence=0.7, days_ago=1),
        entry("weak_guess", "a weaker extracted rule", source=EXTRACTED, confidence=0.65),
    ]
    # When
    result = plan(keep + candidates)
    # Then the least useful go first, in order
    assert deleted(result) == ["weak_guess", "old_guess", "new_guess"]


def test_a_forbidden_entry_survives_the_cap_even_as_the_least_useful() -> None:
    # Given the cap of explicit entries and an old, barely confident extracted rule
    rule = entry(
        "no_gifs", "never use animated gifs", Category.FORBIDDEN, EXTRACTED, 0.6, days_ago=400
    )
    entries = [*filler(CAP), rule]
    # When
    result = plan(entries)
    # Then another entry makes room
    assert len(result.actions) == 1
    assert result.actions[0].deleted != rule


def test_forbidden_entries_alone_may_stay_over_the_cap() -> None:
    rules = [
        entry(f"rule_{n}", f"never do forbidden thing {n}", Category.FORBIDDEN) for n in range(4)
    ]
    assert plan(rules, cap=2).is_empty


# What is considered


def test_expired_entries_are_not_considered() -> None:
    # Given a duplicate that has expired, and a full memory with expired entries on top
    gone = stamp(NOW - timedelta(seconds=1))
    live = entry("header_dark", "dark header")
    expired_twin = entry("dark_header", "dark header", days_ago=1, expires_at=gone)
    expired_filler = [entry(f"old_{n}", "an old specific rule", expires_at=gone) for n in range(5)]
    # Then
    assert plan([live, expired_twin]).is_empty
    assert plan([*filler(CAP), *expired_filler]).is_empty


def test_thread_entries_are_not_considered() -> None:
    thread = "01JTHREAD000000000000000AA"
    twin = entry(
        "dark_header", "dark header", scope=Scope.THREAD, conversation_id=thread, days_ago=1
    )
    assert plan([entry("header_dark", "dark header"), twin]).is_empty
    assert apply_plan([twin], plan([twin])) == [twin]


def test_two_persistent_entries_with_one_key_are_refused() -> None:
    with pytest.raises(ValueError, match="one persistent entry per key"):
        plan([entry("tone", "warm tone please"), entry("tone", "cold tone please")])


# The plan as a whole


def messy_memory() -> list[MemoryEntry]:
    """A memory with something for every step, over a cap of 12."""
    return [
        entry("header_dark", "Use a dark header.", days_ago=5),
        entry("dark_header", "dark header", days_ago=1),
        entry("header_color", "dark navy blue", days_ago=9),
        entry("header_colour", "light grey header", source=EXTRACTED, days_ago=0.5),
        entry("tone", "warm and plainspoken", Category.BRAND, days_ago=30),
        entry("brand_tone", "Warm and plainspoken.", Category.BRAND, EXTRACTED, days_ago=2),
        entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN, days_ago=40),
        entry("blog_images", "use stock photos for the blog", days_ago=3),
        entry("no_gifs", "no gifs", Category.FORBIDDEN, EXTRACTED, 0.3, days_ago=90),
        entry("ack", "ok", source=EXTRACTED),
        entry("vibe", "nice", source=CONSOLIDATED),
        entry("guess", "probably likes long emails", source=EXTRACTED, confidence=0.4),
        entry("mine", "ok"),
        *filler(10, source=EXTRACTED, confidence=0.7),
    ]


def test_every_step_of_a_messy_memory_in_order() -> None:
    # Given
    entries = messy_memory()
    # When
    result = plan(entries, cap=12)
    # Then
    steps = [(a.step, a.deleted.key) for a in result.actions]
    assert steps == [
        (ConsolidationStep.MERGE, "header_dark"),
        (ConsolidationStep.MERGE, "brand_tone"),
        (ConsolidationStep.RESOLVE, "no_stock_photos"),
        (ConsolidationStep.RESOLVE, "header_colour"),
        (ConsolidationStep.PRUNE, "ack"),
        (ConsolidationStep.PRUNE, "guess"),
        (ConsolidationStep.PRUNE, "vibe"),
        (ConsolidationStep.CAP, "topic_009"),
        (ConsolidationStep.CAP, "topic_008"),
        (ConsolidationStep.CAP, "topic_007"),
        (ConsolidationStep.CAP, "topic_006"),
    ]
    assert len(apply_plan(entries, result)) == 12


def test_planning_again_after_applying_a_plan_finds_nothing() -> None:
    entries = messy_memory()
    once = apply_plan(entries, plan(entries, cap=12))
    assert plan(once, cap=12).is_empty


def test_the_plan_is_the_same_whatever_order_the_entries_come_in() -> None:
    entries = messy_memory()
    shuffled = entries[:]
    random.Random(7).shuffle(shuffled)
    assert plan(shuffled, cap=12) == plan(entries, cap=12)


def test_every_surviving_entry_is_an_input_entry_word_for_word() -> None:
    entries = messy_memory()
    kept = apply_plan(entries, plan(entries, cap=12))
    assert all(survivor in entries for survivor in kept)
    assert {survivor.value for survivor in kept} <= {e.value for e in entries}
    assert "ok" in {survivor.value for survivor in kept}  # the user's own "ok" stays


# Properties over generated memories

_KEYS = [
    "header_dark",
    "dark_header",
    "header_colour",
    "header_color",
    "tone",
    "brand_tone",
    "no_stock_photos",
    "stock_photos",
    "blog_images",
    "note",
    "font",
    "fonts",
]
_VALUES = [
    "dark header",
    "Use a dark header.",
    "light grey header",
    "warm and plainspoken",
    "never use stock photos",
    "use stock photos for the blog",
    "stock photos from unsplash",
    "ok",
    "nice",
    "a serif font for headings",
    "no serif fonts",
    "dark",
]

memories = st.lists(
    st.builds(
        entry,
        key=st.sampled_from(_KEYS),
        value=st.sampled_from(_VALUES),
        category=st.sampled_from(list(Category)),
        source=st.sampled_from(list(Source)),
        confidence=st.sampled_from([0.3, 0.59, 0.6, 0.9, 1.0]),
        days_ago=st.integers(min_value=0, max_value=5),
    ),
    max_size=12,
    unique_by=lambda generated: generated.key,
)


@settings(max_examples=300, deadline=None)
@given(memories, st.integers(min_value=1, max_value=8))
def test_any_memory_is_consolidated_once_for_all_without_new_words(
    entries: list[MemoryEntry], cap: int
) -> None:
    # When
    result = plan(entries, cap=cap)
    kept = apply_plan(entries, result)
    # Then planning again finds nothing, and what stays is input word for word
    assert plan(kept, cap=cap).is_empty
    assert all(survivor in entries for survivor in kept)
    assert plan(list(reversed(entries)), cap=cap) == result
    # And the cap holds unless forbidden entries alone fill it
    assert len(kept) <= cap or all(e.category == Category.FORBIDDEN for e in kept)
    for action in result.actions:
        gone = action.deleted
        # A forbidden entry goes only for an entry said strictly later that opposes it
        if gone.category == Category.FORBIDDEN:
            assert action.step is ConsolidationStep.RESOLVE
            assert action.kept is not None
            assert when_said(action.kept) > when_said(gone)
            assert opposed(action.kept, gone)
        # An explicit entry is never pruned, and never gives way to a background one
        if gone.source == EXPLICIT:
            assert action.step in {
                ConsolidationStep.MERGE,
                ConsolidationStep.RESOLVE,
                ConsolidationStep.CAP,
            }
            if action.step in {ConsolidationStep.MERGE, ConsolidationStep.RESOLVE}:
                assert action.kept is not None and action.kept.source == EXPLICIT
