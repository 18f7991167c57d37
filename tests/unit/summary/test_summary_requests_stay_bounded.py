"""A summary request carries no more of a thread than its budget: a model refuses a
request beyond its context window, and would refuse it again on every retry, so the
summary of a long imported thread would never move on."""

from __future__ import annotations

from recall.domain.ids import new_id
from recall.domain.messages import Message
from recall.domain.prompt import ModelReply, ModelRequest
from recall.domain.summary import RollingSummary
from recall.services.summaries import ModelSummarizer

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
FOLD_MAX_CHARS = 20_000
MESSAGE_MAX_CHARS = 4_000


class Capture:
    """A model that answers every summary request with one fact, and keeps the requests."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def converse(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return ModelReply(text=f"Facts:\n- Fact {len(self.requests)}")


def summarizer(model: Capture) -> ModelSummarizer:
    return ModelSummarizer(
        model,
        MODEL,
        2_000,
        300,
        800,
        fold_max_chars=FOLD_MAX_CHARS,
        message_max_chars=MESSAGE_MAX_CHARS,
    )


def pasted_pages(count: int, chars: int) -> list[Message]:
    return [
        Message(
            message_id=new_id(),
            role="user" if n % 2 == 0 else "assistant",
            content=(f"Page {n} begins. " + "Copy for the spring catalogue. " * chars)[:chars],
            created_at="2026-11-29T00:00:00.000Z",
        )
        for n in range(count)
    ]


def transcript(request: ModelRequest) -> str:
    (prompt,) = request.messages
    return prompt.text.split("<new_messages>\n", 1)[1].removesuffix("\n</new_messages>")


def test_a_fold_of_a_long_thread_sends_only_the_oldest_messages_that_fit_its_budget() -> None:
    # Given 60 messages of 3,000 characters, nine times the budget of one request
    model = Capture()
    thread = pasted_pages(60, 3_000)

    # When
    summary = summarizer(model).fold(RollingSummary(), thread)

    # Then one request, within the budget, with the oldest messages
    (request,) = model.requests
    sent = transcript(request)
    assert len(sent) <= FOLD_MAX_CHARS
    lines = sent.splitlines()
    assert lines[0].startswith("user: Page 0 begins.")
    # And the summary covers exactly what was sent, so the next fold starts after it
    assert summary.covers_through == thread[len(lines) - 1].message_id
    assert summary.messages_covered == len(lines)


def test_the_next_fold_starts_where_the_last_one_stopped() -> None:
    # Given a summary that covers the first request's messages
    model = Capture()
    thread = pasted_pages(60, 3_000)
    first = summarizer(model).fold(RollingSummary(), thread)
    covered = first.messages_covered

    # When the same messages are folded again over it
    second = summarizer(model).fold(first, thread)

    # Then the second request starts with the first message not covered
    assert transcript(model.requests[1]).startswith(f"{thread[covered].role}: Page {covered} ")
    assert len(transcript(model.requests[1])) <= FOLD_MAX_CHARS
    assert "Fact 1" in model.requests[1].messages[0].text
    assert second.messages_covered > covered


def test_a_message_longer_than_its_bound_is_sent_as_its_start_and_its_end() -> None:
    # Given one reply of 60,000 characters, as an import may hold
    model = Capture()
    page = "The spring range launches in March. " + "filler " * 9_000 + "Ship to Spain too?"
    long_reply = pasted_pages(1, 10)[0].model_copy(update={"content": page})

    # When
    summarizer(model).fold(RollingSummary(), [long_reply])

    # Then
    sent = transcript(model.requests[0])
    assert len(sent) <= MESSAGE_MAX_CHARS + len("assistant: ")
    assert "The spring range launches in March." in sent
    assert sent.endswith("Ship to Spain too?")
