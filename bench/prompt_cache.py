"""How much of each turn's prompt a model's prompt cache could reuse (``make bench``).

Runs one thread of many turns through the real chat handler, over the embedded store with
the offline model, folding the summary after each turn as the worker would. Each turn's
first model request is rendered as Bedrock receives it for a caching model (tools, system,
messages, in the order Claude caches them, serialised deterministically), and measured as
the share of its bytes that repeat the previous turn's prompt from the first byte: what a
cache can hit. Beside it, the prompt's tokens and those of a full replay of the thread."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from functools import lru_cache
import io
import json
import os
import statistics
import sys
from typing import Any
import warnings

from local import embedded, runtime
from recall import wiring
from recall.domain.context import token_estimate
from recall.domain.jobs import SummarizeJob
from recall.domain.prompt import ModelReply, ModelRequest, PromptMessage
from recall.observability import logger
from recall.providers import OfflineProvider
from recall.providers.converse_request import converse_params
from recall.settings import get_settings

USER = "bench-cache-user"

# What people ask over a long thread: varied, no memory rules (those change the system part
# for their own reason, and the bench measures the window's).
_ASKS = (
    "What should the homepage hero say for the winter sale on item {n}?",
    "Give me three subject lines for newsletter number {n}.",
    "How would you describe product {n} in two sentences for the shop?",
    "Which opening hours should we show on banner {n}?",
    "Draft a short reply to customer question {n} about delivery times.",
)


@dataclass
class TurnPrompt:
    """One turn's prompt: the bytes it shares with the previous turn's, and its tokens."""

    reused: float
    prompt_tokens: int
    replay_tokens: int


class RecordingModel:
    """The offline model, keeping every request it answers."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []
        self._inner = OfflineProvider()

    def converse(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return self._inner.converse(request)


def rendered(request: ModelRequest, model_id: str) -> bytes:
    """The request as Bedrock gets it for ``model_id`` with cache points, in cache order."""
    params = converse_params(request.model_copy(update={"model_id": model_id}), cache_points=True)
    ordered = [params.get("toolConfig"), params.get("system"), params["messages"]]
    return json.dumps(ordered, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def shared_prefix(previous: bytes, current: bytes) -> int:
    """How many leading bytes two prompts share."""
    limit = min(len(previous), len(current))
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if previous[:middle] == current[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def call(method: str, path: str, body: Any = None) -> dict[str, Any]:
    found = runtime.match_route(method, path)
    assert found is not None, path
    reply: dict[str, Any] = runtime.invoke(
        found[0].function, runtime.http_event(method, path, body=body, sub=USER)
    )
    assert reply["statusCode"] in (200, 201), reply
    return json.loads(reply["body"])  # type: ignore[no-any-return]


@contextmanager
def _answered_by(model: RecordingModel) -> Iterator[None]:
    wiring.model_choice().use(model)
    try:
        yield
    finally:
        wiring.model_choice().use(None)


def thread_prompts(turns: int) -> list[TurnPrompt]:
    """Run ``turns`` turns on one new thread (on the running embedded store) and measure
    each turn's prompt against the previous one's; the first turn has none to reuse."""
    model = RecordingModel()
    cache_model = get_settings().bedrock_model_id
    project = call("POST", "/projects", {"name": "Prompt cache bench"})["id"]
    conversation: str | None = None
    history: list[PromptMessage] = []
    previous = b""
    measured: list[TurnPrompt] = []
    with _answered_by(model):
        for n in range(turns):
            text = _ASKS[n % len(_ASKS)].format(n=n)
            body: dict[str, Any] = {"message": text}
            if conversation:
                body["conversationId"] = conversation
            asked = len(model.requests)
            reply = call("POST", f"/projects/{project}/chat", body)
            conversation = reply["conversation"]["id"]
            request = model.requests[asked]
            prompt = rendered(request, cache_model)
            replay = request.model_copy(
                update={"messages": [*history, PromptMessage(role="user", text=text)]}
            )
            measured.append(
                TurnPrompt(
                    reused=shared_prefix(previous, prompt) / len(prompt),
                    prompt_tokens=token_estimate(request),
                    replay_tokens=token_estimate(replay),
                )
            )
            previous = prompt
            history += [
                PromptMessage(role="user", text=text),
                PromptMessage(role="assistant", text=reply["message"]["content"]),
            ]
            wiring.job_runner().run(
                SummarizeJob(user_id=USER, project_id=project, conversation_id=conversation)
            )
    return measured


def median_reuse(prompts: list[TurnPrompt]) -> float:
    """The median share reused, over the turns that had a previous prompt."""
    return statistics.median(prompt.reused for prompt in prompts[1:])


@lru_cache(maxsize=4)
def _median_over(turns: int) -> float:
    with redirect_stdout(io.StringIO()):
        return median_reuse(thread_prompts(turns))


def measure(length: int) -> tuple[str, str]:
    """``make bench``'s table cells for a thread of ``length`` messages (on its running
    store): the median prefix reuse over as many turns, at most 100 (the pattern repeats
    every six turns once the window is full), and the time to first delta of a streamed
    turn (``bench/stream.py``)."""
    from bench.stream import cell

    turns = max(2, min(length // 2, 100))
    return f"{_median_over(turns):.0%}", cell(length)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument(
        "--evict-step", type=int, default=None, help="WINDOW_EVICT_STEP for this run"
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore", "No application metrics")
    logger.setLevel("WARNING")
    if args.evict_step is not None:
        os.environ["WINDOW_EVICT_STEP"] = str(args.evict_step)
    # The handlers' metrics go to stdout, as Lambda's would; the bench prints its own lines.
    with embedded.running(), redirect_stdout(io.StringIO()):
        prompts = thread_prompts(args.turns)
    settings = get_settings()
    prompt_tokens = sum(prompt.prompt_tokens for prompt in prompts)
    replay_tokens = sum(prompt.replay_tokens for prompt in prompts)
    uncached = sum(round(prompt.prompt_tokens * (1 - prompt.reused)) for prompt in prompts)
    print(
        f"turns: {args.turns}; window {settings.window_messages} messages, "
        f"evict step {settings.window_evict_step}"
    )
    print(f"median prompt prefix reused from the previous turn: {median_reuse(prompts):.1%}")
    print(
        f"prompt tokens (estimated): {prompt_tokens} in all, {uncached} past the reused "
        f"prefix; a full replay of the thread: {replay_tokens}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
