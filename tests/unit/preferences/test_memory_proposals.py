"""Which user words become memory, and as what: the floor on the labelled utterances, the
category of clear cases, and keys that are valid and stay the same for the same rule."""

from __future__ import annotations

from pathlib import Path
import re

from hypothesis import given
from hypothesis import strategies as st
import pytest

from bench.eval_preferences import HELD_OUT, LABELLED, MIN_PRECISION, MIN_RECALL, load, score
from recall.domain.memory import Category, MemoryEntry
from recall.domain.memory_proposals import (
    MemoryProposal,
    memory_key,
    place_proposal,
    propose_memories,
    propose_memory,
)
from recall.domain.tools import KEY_PATTERN, MAX_VALUE_LENGTH


def proposal(text: str) -> MemoryProposal:
    found = propose_memory(text)
    assert found is not None, text
    return found


def test_the_labelled_set_is_large_varied_and_mostly_rules() -> None:
    # Given
    utterances = load(LABELLED)
    rules = [u for u in utterances if u.label]

    # Then
    assert len(utterances) >= 150
    assert 0.55 <= len(rules) / len(utterances) <= 0.65
    assert {u.category for u in rules} == {c.value for c in Category}
    assert {u.kind for u in utterances if not u.label} >= {
        "question",
        "negated question",
        "chit-chat",
        "reported speech",
        "past event",
        "hypothetical",
        "one-off",
    }


@pytest.mark.parametrize("utterances", [LABELLED, HELD_OUT], ids=["labelled", "held-out"])
def test_rules_are_told_from_chatter_with_high_precision_and_fair_recall(
    utterances: Path,
) -> None:
    # When
    result = score(load(utterances))

    # Then
    wrong = [utterance.text for utterance, _ in result.wrong]
    assert result.precision >= MIN_PRECISION, wrong
    assert result.recall >= MIN_RECALL, wrong


@pytest.mark.parametrize(
    "chatter",
    [
        "Do you always answer this fast?",
        "Why did you never suggest a dark theme?",
        "Can you avoid stock photos?",
        "Don't you think the header is too dark?",
        "My boss said we should always use red.",
        "Yesterday I never got a reply from the supplier.",
        "If I said always use red, would you remember it?",
        "Make this paragraph shorter.",
        "For this reply only, use bullet points.",
        "Thanks, never mind.",
    ],
)
def test_chatter_proposes_nothing(chatter: str) -> None:
    assert propose_memories(chatter) == []


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Never use rounded buttons.", Category.FORBIDDEN),
        ("Avoid bright blue anywhere", Category.FORBIDDEN),
        ("Stop using emojis in product descriptions", Category.FORBIDDEN),
        ("No more stock photos of handshakes.", Category.FORBIDDEN),
        ("Don't use exclamation marks.", Category.FORBIDDEN),
        ("Our tone is warm and plainspoken.", Category.BRAND),
        ("Going forward, write all copy in the second person", Category.BRAND),
        ("Our audience is small bakeries.", Category.BRAND),
        ("Always keep the header dark.", Category.PREFERENCES),
        ("I prefer serif fonts for headings.", Category.PREFERENCES),
        ("Never forget to add alt text to images.", Category.PREFERENCES),
        ("We sell handmade candles in Lisbon.", Category.CONTEXT),
        ("Our store opens on 1 June.", Category.CONTEXT),
        ("We decided to launch in March.", Category.HISTORY),
        ("We went with the serif logo in the end.", Category.HISTORY),
    ],
)
def test_clear_cases_get_their_category(text: str, category: Category) -> None:
    assert proposal(text).category == category


def test_a_proposal_keeps_the_users_words_without_the_lead_in() -> None:
    # When
    found = proposal("Remember that our audience is small bakeries.")

    # Then
    assert found.value == "our audience is small bakeries"
    assert found.key == "audience_small_bakeries"


def test_keys_come_from_content_words_and_forbidden_ones_say_no() -> None:
    assert proposal("Always keep the header dark").key == "header_dark"
    assert proposal("Please, never use rounded buttons.").key == "no_rounded_buttons"
    assert proposal("Stop using emojis in product descriptions").key == (
        "no_emojis_product_descriptions"
    )
    assert proposal("Going forward, write all copy in the second person").key == (
        "write_copy_second_person"
    )


@pytest.mark.parametrize(
    "restated",
    [
        "never use rounded buttons",
        "NEVER use rounded buttons!!!",
        "Please, never use rounded buttons.",
        "Never use rounded buttons in this conversation.",
    ],
)
def test_the_same_rule_restated_keeps_its_key(restated: str) -> None:
    # Given
    first = proposal("Never use rounded buttons.")

    # Then
    assert proposal(restated).key == first.key


def test_accents_fold_into_the_key() -> None:
    # When
    accented = proposal("Always call the shop a café.")

    # Then
    assert accented.key == proposal("Always call the shop a cafe.").key == "call_shop_cafe"


def test_words_that_state_nothing_get_a_stable_note_key() -> None:
    # When
    first, again = proposal("Always 🚀✨"), proposal("Always 🚀✨")

    # Then
    assert re.fullmatch(r"note_[0-9a-f]{8}", first.key)
    assert again.key == first.key


def test_markers_with_nothing_after_them_propose_nothing() -> None:
    assert propose_memory("I prefer") is None
    assert propose_memory("Never!") is None


def test_each_rule_in_a_message_is_its_own_proposal_and_repeats_collapse() -> None:
    # When
    found = propose_memories(
        "Hi! Don't use stock photos. Always use a green palette. Never use stock photos."
    )

    # Then
    assert [p.key for p in found] == ["no_stock_photos", "green_palette"]


def test_asking_to_remember_is_the_surest_evidence() -> None:
    # Given
    asked = proposal("Remember that we ship only within the EU.")
    stated = proposal("We ship only within the EU.")

    # Then
    assert asked.category == stated.category == Category.CONTEXT
    assert asked.confidence > stated.confidence >= 0.6


@given(st.text(max_size=800))
def test_every_proposal_fits_a_memory_entry(text: str) -> None:
    for found in propose_memories(text):
        assert re.fullmatch(KEY_PATTERN, found.key)
        assert 1 <= len(found.value) <= MAX_VALUE_LENGTH
        assert "\n" not in found.value
        assert 0.0 <= found.confidence <= 1.0
        assert found.category in Category


@given(st.from_regex(r"(Always|Never|From now on,) [a-z ]{0,600}", fullmatch=True))
def test_rules_of_any_length_get_valid_keys_and_bounded_values(text: str) -> None:
    found = propose_memory(text)
    if found is not None:
        assert re.fullmatch(KEY_PATTERN, found.key)
        assert len(found.value) <= MAX_VALUE_LENGTH


def test_memory_key_of_a_very_long_statement_fits_the_pattern() -> None:
    key = memory_key("extraordinarily " * 20, forbidden=True)

    assert re.fullmatch(KEY_PATTERN, key)
    assert key.startswith("no_")


def saved(*texts: str) -> list[MemoryEntry]:
    """The entries the offline save of each text would hold, each under its placed key."""
    held: list[MemoryEntry] = []
    for text in texts:
        said = proposal(text)
        key = place_proposal(said, held)
        held = [e for e in held if e.key != key]
        held.append(MemoryEntry(key=key, value=said.value, category=said.category))
    return held


def test_a_rule_changed_to_a_new_value_updates_its_entry() -> None:
    held = saved("Always keep the header dark", "Actually, always keep the header light")
    assert [(e.key, e.value) for e in held] == [
        ("header_dark", "Actually, always keep the header light")
    ]


def test_the_same_value_for_another_thing_or_a_prohibition_is_an_entry_of_its_own() -> None:
    held = saved(
        "Always keep the header dark",
        "Always keep the footer dark",
        "Never use a light header",
    )
    assert [e.key for e in held] == ["header_dark", "footer_dark", "no_light_header"]


CHECKOUT = "Never use bright blue rounded buttons on the checkout page"
NEWSLETTER = "Never use bright blue rounded buttons in newsletter emails"


def test_two_rules_that_share_their_first_words_each_keep_their_own_entry() -> None:
    held = saved(CHECKOUT, NEWSLETTER)
    assert [(e.key, e.value) for e in held] == [
        ("no_bright_blue_rounded_buttons", CHECKOUT),
        ("no_bright_blue_rounded_buttons_newsletter_emails", NEWSLETTER),
    ]


def test_restating_either_of_two_rules_that_share_their_first_words_updates_it() -> None:
    held = saved(CHECKOUT, NEWSLETTER, f"{NEWSLETTER}!", f"{CHECKOUT}.")
    assert [e.key for e in held] == [
        "no_bright_blue_rounded_buttons_newsletter_emails",
        "no_bright_blue_rounded_buttons",
    ]


def test_a_value_changed_past_the_keys_words_still_updates_its_entry() -> None:
    held = saved(
        "Always keep the checkout page primary button dark",
        "Always keep the checkout page primary button light",
    )
    assert [(e.key, e.value) for e in held] == [
        ("checkout_page_primary_button", "Always keep the checkout page primary button light")
    ]


def test_a_rule_whose_longer_key_is_taken_too_gets_a_stable_suffix() -> None:
    # Given both the short and the long key hold other rules
    taken = [
        MemoryEntry(
            key="no_bright_blue_rounded_buttons", value=CHECKOUT, category=Category.FORBIDDEN
        ),
        MemoryEntry(
            key="no_bright_blue_rounded_buttons_newsletter_emails",
            value="never use rounded corners anywhere",
            category=Category.FORBIDDEN,
        ),
    ]
    # When / Then
    key = place_proposal(proposal(NEWSLETTER), taken)
    assert re.fullmatch(KEY_PATTERN, key)
    assert key.startswith("no_bright_blue_rounded_buttons_newsletter_emails_")
    assert key not in {e.key for e in taken}
    assert place_proposal(proposal(f"{NEWSLETTER}."), taken) == key
