"""The numbers the product's source documents name are the settings' defaults: a deployment
that sets nothing behaves as they describe (each can still be changed by its variable)."""

from __future__ import annotations

import pytest

from recall.settings import Settings

SEEDS = {
    # "the 50 most recent threads ordered by last update"
    "conversations_page_default": 50,
    # "MAX_HISTORY_MESSAGES = 20 ... the last 20 messages"
    "window_messages": 20,
    # "SESSION_MSG_NUDGE_THRESHOLD = 120 turns"
    "nudge_threshold_turns": 120,
    # "deletes sessions whose updated_at is older than 24 hours by default"
    "session_idle_seconds": 24 * 3600,
    # "at least 24 hours since the last consolidation, at least 3 sessions ... at least 5
    # stored memories. It keeps at most 50 entries per project"
    "consolidate_min_seconds": 24 * 3600,
    "consolidate_min_sessions": 3,
    "consolidate_min_memories": 5,
    "memory_cap": 50,
    # extraction: "thread ≥ 6 messages ...; at most once per 4 h ...; keep confidence ≥ 0.6;
    # at most 8 new entries a run"
    "extract_min_messages": 6,
    "extract_cooldown_seconds": 4 * 3600,
    "extract_min_confidence": 0.6,
    "extract_max_new": 8,
}


@pytest.mark.parametrize(("name", "value"), sorted(SEEDS.items()))
def test_a_number_the_seeds_name_is_the_default(name: str, value: float) -> None:
    assert Settings.model_fields[name].default == value
