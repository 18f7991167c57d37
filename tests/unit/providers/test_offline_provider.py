"""The offline model: deterministic answers that show what context reached it."""

from __future__ import annotations

import re

import pytest

from recall.domain.prompt import ModelRequest, PromptMessage, ToolCall, ToolResult
from recall.domain.tools import FORGET_PREFERENCE, KEY_PATTERN, MEMORY_TOOLS, SAVE_PREFERENCE
from recall.providers.offline import OfflineProvider, memory_entries

MEMORY = """<project_memory>
[brand]
tone: warm, plainspoken, never corporate jargon
[preferences]
header_color: deep navy header with white text
[forbidden]
no_stock_photos: never use generic stock photography
</project_memory>
<thread_memory>
[context]
launch_date: the store opens on 1 June
</thread_memory>"""
SYSTEM = ["You are a store-building assistant.", "Tool instructions.", MEMORY]


def request(
    *messages: PromptMessage, tools: bool = True, system: list[str] = SYSTEM
) -> ModelRequest:
    return ModelRequest(
        model_id="offline",
        system=system,
        messages=list(messages),
        tools=MEMORY_TOOLS if tools else [],
    )


def user(text: str = "", **fields: object) -> PromptMessage:
    return PromptMessage(role="user", text=text, **fields)


def assistant(text: str = "", **fields: object) -> PromptMessage:
    return PromptMessage(role="assistant", text=text, **fields)


@pytest.fixture
def provider() -> OfflineProvider:
    return OfflineProvider()


def only_call(provider: OfflineProvider, text: str) -> ToolCall:
    reply = provider.converse(request(user(text)))
    assert reply.stop_reason == "tool_use"
    (call,) = reply.tool_calls
    return call


def test_always_statement_is_saved_as_a_persistent_preference(provider: OfflineProvider) -> None:
    # When
    call = only_call(provider, "always keep the header dark")

    # Then
    assert call.name == SAVE_PREFERENCE
    assert call.input == {
        "key": "header_dark",
        "value": "always keep the header dark",
        "category": "preferences",
        "scope": "persistent",
    }


def test_never_statement_is_saved_as_forbidden(provider: OfflineProvider) -> None:
    call = only_call(provider, "Please, never use rounded buttons.")

    assert call.input["key"] == "no_rounded_buttons"
    assert call.input["category"] == "forbidden"
    assert call.input["value"] == "Please, never use rounded buttons"


@pytest.mark.parametrize(
    "text",
    ["Don't use exclamation marks", "do not show prices without VAT", "NEVER autoplay video"],
)
def test_dont_and_do_not_are_forbidden_too(provider: OfflineProvider, text: str) -> None:
    assert only_call(provider, text).input["category"] == "forbidden"


def test_tone_statement_is_saved_as_brand(provider: OfflineProvider) -> None:
    call = only_call(provider, "Always write in a playful, friendly tone.")

    assert call.input["category"] == "brand"
    assert call.input["key"] == "write_playful_friendly_tone"


def test_remember_that_drops_the_lead_in_from_the_value(provider: OfflineProvider) -> None:
    call = only_call(provider, "Remember that our audience is small bakeries")

    assert call.input["value"] == "our audience is small bakeries"
    assert call.input["category"] == "brand"


def test_preference_for_this_conversation_is_thread_scoped(provider: OfflineProvider) -> None:
    call = only_call(provider, "I'd prefer a serif font in this conversation")

    assert call.input["scope"] == "thread"
    assert call.input["key"] == "serif_font"


def test_a_rule_for_the_rest_of_the_conversation_is_thread_scoped(
    provider: OfflineProvider,
) -> None:
    call = only_call(provider, "For the rest of this conversation, answer in French.")

    assert call.input["scope"] == "thread"
    assert call.input["key"] == "answer_french"


def test_never_forget_is_a_rule_to_follow_not_a_forbidden_thing(provider: OfflineProvider) -> None:
    call = only_call(provider, "Never forget to add alt text to images")

    assert call.input["category"] == "preferences"


def test_each_stated_rule_in_one_message_gets_its_own_call(provider: OfflineProvider) -> None:
    reply = provider.converse(
        request(user("Hi! Don't use stock photos. Always use a green palette."))
    )

    assert [call.input["key"] for call in reply.tool_calls] == ["no_stock_photos", "green_palette"]
    assert len({call.id for call in reply.tool_calls}) == 2


@pytest.mark.parametrize(
    "text",
    [
        "always keep the header dark",
        "Never, ever use Comic Sans!!!",
        "I prefer 🚀",
        "Remember that 🚀 launches matter",
        "always " + "very long words " * 40,
    ],
)
def test_keys_always_match_the_key_pattern(provider: OfflineProvider, text: str) -> None:
    assert re.match(KEY_PATTERN, only_call(provider, text).input["key"])


@pytest.mark.parametrize(
    "chatter",
    [
        "Do you always answer this fast?",
        "Why did you never suggest a dark theme?",
        "Don't you think serif fonts look dated?",
        "My boss said we should always use red.",
        "Make this paragraph shorter.",
    ],
)
def test_chatter_is_answered_without_saving_anything(
    provider: OfflineProvider, chatter: str
) -> None:
    # When
    reply = provider.converse(request(user(chatter)))

    # Then
    assert reply.stop_reason == "end_turn"
    assert reply.tool_calls == []


@pytest.mark.parametrize(
    ("text", "key", "category"),
    [
        ("Avoid bright blue anywhere", "no_bright_blue", "forbidden"),
        (
            "Stop using emojis in product descriptions",
            "no_emojis_product_descriptions",
            "forbidden",
        ),
        (
            "Going forward, write all copy in the second person",
            "write_copy_second_person",
            "brand",
        ),
        ("We sell handmade candles in Lisbon.", "sell_handmade_candles_lisbon", "context"),
        ("We decided to launch in March.", "decided_launch_march", "history"),
    ],
)
def test_plainly_stated_rules_and_facts_are_saved(
    provider: OfflineProvider, text: str, key: str, category: str
) -> None:
    call = only_call(provider, text)

    assert call.name == SAVE_PREFERENCE
    assert (call.input["key"], call.input["category"]) == (key, category)
    assert call.input["scope"] == "persistent"


def test_forget_names_the_key_and_keeps_its_scope(provider: OfflineProvider) -> None:
    call = only_call(provider, "Please forget launch_date")

    assert call.name == FORGET_PREFERENCE
    assert call.input == {"key": "launch_date", "scope": "thread"}


def test_stop_remembering_finds_the_saved_entry_it_resembles(provider: OfflineProvider) -> None:
    call = only_call(provider, "stop remembering that we avoid stock photos")

    assert call.input == {"key": "no_stock_photos", "scope": "persistent"}


def test_no_tool_call_when_the_request_offers_no_tools(provider: OfflineProvider) -> None:
    reply = provider.converse(request(user("always keep the header dark"), tools=False))

    assert reply.stop_reason == "end_turn"
    assert reply.tool_calls == []


def test_reply_counts_memory_entries_and_earlier_messages(provider: OfflineProvider) -> None:
    # Given: four earlier messages and four entries across both blocks
    messages = [user("Hi"), assistant("Hello"), user("Build me a shop"), assistant("Sure")]

    # When
    reply = provider.converse(request(*messages, user("What comes next?")))

    # Then
    assert reply.stop_reason == "end_turn"
    assert reply.text.startswith(
        "I can see 4 memory entries and 4 earlier messages in this window."
    )


def test_reply_quotes_the_entry_sharing_most_words(provider: OfflineProvider) -> None:
    reply = provider.converse(request(user("Which photos should the stock gallery use?")))

    assert "no_stock_photos: never use generic stock photography" in reply.text


def test_reply_quotes_the_last_entry_when_nothing_matches(provider: OfflineProvider) -> None:
    reply = provider.converse(request(user("hello")))

    assert "launch_date: the store opens on 1 June" in reply.text


def test_reply_without_memory_says_so_in_the_singular_where_it_fits(
    provider: OfflineProvider,
) -> None:
    reply = provider.converse(request(assistant("Welcome"), user("hello"), system=["Be brief."]))

    assert reply.text == "I can see 0 memory entries and 1 earlier message in this window."


def test_memory_blocks_are_read_with_category_and_scope() -> None:
    entries = memory_entries(SYSTEM)

    assert [(e.key, e.category, e.scope) for e in entries] == [
        ("tone", "brand", "persistent"),
        ("header_color", "preferences", "persistent"),
        ("no_stock_photos", "forbidden", "persistent"),
        ("launch_date", "context", "thread"),
    ]


def test_same_request_gets_the_same_reply(provider: OfflineProvider) -> None:
    turn = request(user("Hi"), assistant("Hello"), user("Never use rounded buttons"))

    assert provider.converse(turn) == OfflineProvider().converse(turn.model_copy(deep=True))


def test_tool_result_round_ends_in_text_naming_what_was_saved(provider: OfflineProvider) -> None:
    # Given
    said = user("always keep the header dark")
    first = provider.converse(request(said))
    results = [ToolResult(tool_call_id=call.id, content="saved") for call in first.tool_calls]

    # When
    second = provider.converse(
        request(said, assistant(tool_calls=first.tool_calls), user(tool_results=results))
    )

    # Then
    assert second.stop_reason == "end_turn"
    assert second.tool_calls == []
    assert second.text == "Saved: header_dark."


def test_failed_and_forgotten_entries_are_reported(provider: OfflineProvider) -> None:
    calls = [
        ToolCall(id="a", name=FORGET_PREFERENCE, input={"key": "tone"}),
        ToolCall(id="b", name=SAVE_PREFERENCE, input={"key": "x"}),
    ]
    results = [
        ToolResult(tool_call_id="a", content="ok"),
        ToolResult(tool_call_id="b", content="limit reached", is_error=True),
    ]

    reply = provider.converse(
        request(user("forget tone"), assistant(tool_calls=calls), user(tool_results=results))
    )

    assert reply.text == "Forgot: tone. Could not save: x (limit reached)."


def test_a_message_already_answered_by_a_tool_round_is_not_answered_with_tools_again(
    provider: OfflineProvider,
) -> None:
    # Given: the tool round happened, then the assistant replied
    said = user("always keep the header dark")
    call = ToolCall(id="t", name=SAVE_PREFERENCE, input={"key": "header_dark"})
    history = [said, assistant(tool_calls=[call]), assistant("Saved: header_dark.")]

    # When
    reply = provider.converse(request(*history))

    # Then
    assert reply.stop_reason == "end_turn"
    assert reply.tool_calls == []


def test_usage_counts_a_token_per_four_characters(provider: OfflineProvider) -> None:
    turn = request(user("hello"), tools=False, system=["abc"])

    reply = provider.converse(turn)

    assert reply.usage.input_tokens == 2  # ceil(8 / 4)
    assert reply.usage.output_tokens == -(-len(reply.text) // 4)


def test_reply_is_cut_at_max_tokens(provider: OfflineProvider) -> None:
    turn = request(user("hello")).model_copy(update={"max_tokens": 5})

    reply = provider.converse(turn)

    assert reply.stop_reason == "max_tokens"
    assert len(reply.text) == 20
