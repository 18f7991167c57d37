"""What a preset adds to a turn (``make bench``): a thread keeps a copy of its preset on
its conversation item, so the turn's one batched read carries it and every turn's update
of that item is charged for its size. One turn on a thread of 10 messages is measured
request by request (``bench/turns.py``'s recorder and unit rules) for a thread without a
preset, one with a typical preset (two short prompts) and one with the largest preset the
settings allow (``CONTEXT_PROMPTS_MAX`` prompts of ``CONTEXT_PROMPT_MAX_CHARS`` ASCII
characters). Ratios are to the thread without a preset, from one run."""

from __future__ import annotations

import json
import sys
from typing import Any
import warnings

from bench.turns import Model, call, recording, text_of
from bench.units import round_trips, units_of
from local import embedded
from recall.observability import logger
from recall.settings import get_settings

LENGTH = 10


def preset_body(kind: str) -> dict[str, Any] | None:
    settings = get_settings()
    if kind == "none":
        return None
    if kind == "typical":
        prompts = [
            {"role": "user", "content": "You write short product blurbs for our shop."},
            {"role": "assistant", "content": "Understood: two sentences, plain words."},
        ]
    else:
        prompts = [
            {
                "role": "user" if n % 2 == 0 else "assistant",
                "content": "x" * settings.context_prompt_max_chars,
            }
            for n in range(settings.context_prompts_max)
        ]
    return {"name": kind, "contextPrompts": prompts, "settings": {"temperature": 0.2}}


def measure(kind: str, model: Model, recorder: Any) -> tuple[int, int, float, float]:
    """Requests before the model, their round trips, WRU and RRU of one turn."""
    project = json.loads(call("POST", "/projects", {"name": f"Presets {kind}"})["body"])["id"]
    first: dict[str, Any] = {"message": text_of(0)}
    body = preset_body(kind)
    if body is not None:
        made = json.loads(call("POST", f"/projects/{project}/presets", body)["body"])
        first["presetId"] = made["id"]
    reply = json.loads(call("POST", f"/projects/{project}/chat", first)["body"])
    thread = reply["conversation"]["id"]
    for n in range(1, LENGTH // 2 - 1):
        call("POST", f"/projects/{project}/chat", {"message": text_of(n), "conversationId": thread})
    recorder.sent.clear()
    model.at.clear()
    call("POST", f"/projects/{project}/chat", {"message": text_of(99), "conversationId": thread})
    [at] = model.at
    before = [s for s in recorder.sent if s.started < at]
    units = [units_of(s) for s in recorder.sent]
    call("DELETE", f"/projects/{project}")
    return (
        len(before),
        round_trips(before),
        sum(u.write for u in units),
        sum(u.read for u in units),
    )


def main() -> int:
    warnings.filterwarnings("ignore", "No application metrics")
    logger.setLevel("WARNING")
    model = Model()
    with embedded.running(), recording(model) as recorder:
        rows = {kind: measure(kind, model, recorder) for kind in ("none", "typical", "largest")}
    base = rows["none"]
    print(f"One turn on a thread of {LENGTH} messages, by the preset it started from")
    print("| preset | requests before (round trips) | WRU | RRU | WRU × none | RRU × none |")
    print("|---|---|---|---|---|---|")
    for kind, (before, trips, wru, rru) in rows.items():
        print(
            f"| {kind} | {before} ({trips}) | {wru:g} | {rru:g} "
            f"| {wru / base[2]:.2f} | {rru / base[3]:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
