"""What two entries mean to each other: subject, same value, duplicate, polarity. Extraction
and consolidation both stand on these definitions."""

from __future__ import annotations

import pytest

from recall.domain.memory import Category, MemoryEntry
from recall.domain.same_meaning import (
    Polarity,
    contradicts,
    duplicates,
    key_subject,
    opposed,
    polarity,
    same_subject,
    same_value,
)


def entry(key: str, value: str = "v", category: Category = Category.PREFERENCES) -> MemoryEntry:
    return MemoryEntry(key=key, value=value, category=category)


def test_keys_with_the_same_words_in_any_order_are_about_the_same_subject() -> None:
    assert same_subject(entry("header_dark"), entry("dark_header"))
    assert same_subject(entry("header.dark"), entry("dark-header"))
    assert not same_subject(entry("header_dark"), entry("footer_dark"))
    assert not same_subject(entry("header"), entry("header_dark"))


def test_a_key_word_that_only_repeats_the_category_adds_nothing() -> None:
    # Given "brand_tone" filed under brand, and under preferences
    assert same_subject(entry("brand_tone", category=Category.BRAND), entry("tone"))
    assert not same_subject(entry("brand_tone"), entry("tone"))
    assert same_subject(entry("preferred_font"), entry("font"))
    # And one key is one subject whatever the category
    assert same_subject(entry("brand_tone", category=Category.BRAND), entry("brand_tone"))


def test_plurals_and_british_spellings_fold_into_one_word() -> None:
    assert same_subject(entry("header_colour"), entry("header_color"))
    assert same_subject(entry("header_colours"), entry("header_color"))
    assert same_subject(entry("stock_photos"), entry("stock_photo"))
    assert same_subject(entry("categories"), entry("category"))
    assert key_subject(entry("opening_hours")) == {"opening", "hour"}


def test_do_and_dont_in_a_key_do_not_change_its_subject() -> None:
    assert key_subject(entry("no_stock_photos", category=Category.FORBIDDEN)) == {"stock", "photo"}
    assert same_subject(entry("use_stock_photos"), entry("no_stock_photos"))


def test_a_key_made_only_of_filler_keeps_its_words() -> None:
    assert key_subject(entry("brand", category=Category.BRAND)) == {"brand"}
    assert not same_subject(entry("no"), entry("use"))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("dark header", "Dark   header."),
        ("dark header", "use a dark header"),
        ("dark headers, please", "dark header"),
        ("never use stock photos", "Don't use stock photos!"),
        ("never use stock photos", "avoid stock photos"),
        ("do not use stock photos", "no stock photos"),
    ],
)
def test_values_are_the_same_after_case_punctuation_articles_and_ways_of_saying_no(
    first: str, second: str
) -> None:
    assert same_value(entry("a", first), entry("b", second))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("red, not blue", "blue, not red"),
        ("dark header", "light header"),
        ("use stock photos", "never use stock photos"),
        ("dark header", "dark navy header"),
    ],
)
def test_values_that_say_something_else_are_not_the_same(first: str, second: str) -> None:
    assert not same_value(entry("a", first), entry("b", second))


def test_the_same_rule_under_two_keys_of_the_same_meaning_is_a_duplicate() -> None:
    assert duplicates(entry("header_dark", "dark header"), entry("dark_header", "Dark header."))


def test_the_same_short_value_under_unrelated_keys_is_not_a_duplicate() -> None:
    # "dark" means something else for a header colour than for a font
    assert not duplicates(entry("header_color", "dark"), entry("header_font", "dark"))


def test_keys_that_both_name_what_their_value_says_make_a_duplicate() -> None:
    # Given two keys whose subjects differ but whose words are both in the value
    first = entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN)
    second = entry("avoid_stock", "Avoid stock photos.", Category.FORBIDDEN)
    # Then
    assert not same_subject(first, second)
    assert duplicates(first, second)
    assert not duplicates(first, entry("imagery", "never use stock photos"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("never use stock photos", Polarity.NEGATIVE),
        ("don't shout", Polarity.NEGATIVE),
        ("avoid jargon", Polarity.NEGATIVE),
        ("no emojis", Polarity.NEGATIVE),
        ("always sign off warmly", Polarity.POSITIVE),
        ("use stock photos for the blog", Polarity.POSITIVE),
        ("do mention the discount", Polarity.POSITIVE),
        ("dark header", Polarity.NEUTRAL),
    ],
)
def test_polarity_is_read_from_the_words_of_the_value(value: str, expected: Polarity) -> None:
    assert polarity(entry("k", value)) is expected


def test_a_forbidden_entry_is_negative_whatever_its_words() -> None:
    rule = entry("stock", "stock photography", Category.FORBIDDEN)
    assert polarity(rule) is Polarity.NEGATIVE
    assert opposed(rule, entry("blog", "use stock photos"))
    assert not opposed(rule, entry("blog", "stock photos on the blog"))


def test_one_thing_given_another_value_on_a_scale_is_a_contradiction() -> None:
    dark = entry("header_dark", "Always keep the header dark")
    assert contradicts(dark, entry("header_light", "Actually, always keep the header light"))
    assert contradicts(entry("prices_euros", "prices in euros"), entry("prices_dollars", "$"))


def test_two_settings_each_with_its_own_values_are_no_contradiction() -> None:
    # The keys differ by one colour, but each value names a setting of its own
    black = entry("logo_black", "Use the black logo on light backgrounds")
    white = entry("logo_white", "Use the white logo on dark backgrounds")
    assert not contradicts(black, white)
    assert not contradicts(white, black)


def test_two_things_or_two_prohibitions_or_two_categories_are_no_contradiction() -> None:
    dark = entry("header_dark", "Always keep the header dark")
    # Another thing with the same value, or a word that is not a value on a scale
    assert not contradicts(dark, entry("footer_dark", "Always keep the footer dark"))
    assert not contradicts(
        entry("red_buttons_checkout", "red buttons on checkout"),
        entry("red_buttons_homepage", "red buttons on the homepage"),
    )
    # Two prohibitions, a prohibition and a requirement, two categories
    assert not contradicts(
        entry("header_dark", "never a dark header"), entry("header_light", "no light header")
    )
    assert not contradicts(dark, entry("header_light", "never use a light header"))
    assert not contradicts(dark, entry("header_light", "light header", Category.BRAND))
