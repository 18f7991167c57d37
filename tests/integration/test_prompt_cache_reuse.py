"""A long thread's prompts repeat each other from the first byte, so a model's prompt cache
keeps hitting: the window drops messages in steps and the layers that change least lead."""

from __future__ import annotations

from bench.prompt_cache import median_reuse, thread_prompts


def test_most_of_each_prompt_repeats_the_previous_turns_prompt_over_a_long_thread() -> None:
    prompts = thread_prompts(40)
    assert median_reuse(prompts) >= 0.8
    # even a turn whose window dropped reuses what leads the summary (tools, system text,
    # memory, project context): with the summary first it would be under a third
    assert min(prompt.reused for prompt in prompts[1:]) >= 0.45
    # the window is still bounded: far fewer tokens than replaying the whole thread
    assert prompts[-1].prompt_tokens < prompts[-1].replay_tokens
