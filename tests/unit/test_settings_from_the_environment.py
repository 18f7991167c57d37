"""How a deployment tunes Recall: each setting from its environment variable, as the
template and a deployer set them, with keyword arguments winning for tests."""

from __future__ import annotations

from pydantic import ValidationError
import pytest

from recall.settings import Settings


def test_an_environment_variable_overrides_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given
    monkeypatch.setenv("WINDOW_MESSAGES", "12")
    monkeypatch.setenv("MODEL_PROVIDER", "bedrock")
    # When
    settings = Settings()
    # Then
    assert settings.window_messages == 12
    assert settings.model_provider == "bedrock"
    assert settings.memory_cap == Settings.model_fields["memory_cap"].default


def test_a_variable_is_matched_whatever_its_case(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given
    monkeypatch.setenv("window_messages", "14")
    # When / Then
    assert Settings().window_messages == 14


def test_lists_are_comma_separated_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given
    monkeypatch.setenv("ALLOWED_MODEL_IDS", "us.amazon.nova-pro-v1:0, recall-offline,")
    monkeypatch.setenv("JWT_AUDIENCE", "console")
    # When
    settings = Settings()
    # Then
    assert settings.allowed_model_ids == ("us.amazon.nova-pro-v1:0", "recall-offline")
    assert settings.jwt_audience == ("console",)


def test_a_keyword_argument_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given
    monkeypatch.setenv("WINDOW_MESSAGES", "12")
    # When / Then
    assert Settings(window_messages=8).window_messages == 8


def test_a_value_that_is_not_a_number_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given
    monkeypatch.setenv("MEMORY_CAP", "fifty")
    # When / Then
    with pytest.raises(ValidationError, match="memory_cap"):
        Settings()


def test_a_misspelt_keyword_is_refused() -> None:
    # When / Then: a test pinning a setting that does not exist would pin nothing
    with pytest.raises(ValidationError, match="window_mesages"):
        Settings(window_mesages=8)  # type: ignore[call-arg]


def test_settings_cannot_change_once_read() -> None:
    # Given
    settings = Settings()
    # When / Then
    with pytest.raises(ValidationError):
        settings.window_messages = 3  # type: ignore[misc]
