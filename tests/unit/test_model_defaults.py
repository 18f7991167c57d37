"""The deployed default model is the one the code defaults to: current-generation models
reached through cross-region inference profiles, the same ids in the template and in the
settings."""

from __future__ import annotations

from local import template
from recall.settings import Settings

INFERENCE_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "global.")


def test_the_template_and_the_settings_default_to_the_same_models() -> None:
    parameters = template.load()["Parameters"]
    assert (
        parameters["BedrockModelId"]["Default"] == Settings.model_fields["bedrock_model_id"].default
    )
    allowed = tuple(parameters["AllowedModelIds"]["Default"].split(","))
    assert allowed == Settings.model_fields["allowed_model_ids"].default


def test_the_default_models_are_reached_through_cross_region_inference_profiles() -> None:
    defaults = (
        Settings.model_fields["bedrock_model_id"].default,
        *Settings.model_fields["allowed_model_ids"].default,
    )
    assert all(model.startswith(INFERENCE_PROFILE_PREFIXES) for model in defaults)
    assert defaults[0] in defaults[1:]
