"""Presets in the console: a new chat started from one shows its prompts in the model's
view, the thread's settings are overridden and followed again there, and a preset is
added from the project panel."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect
import pytest

from recall.settings import Settings
from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import sign_in

pytestmark = pytest.mark.e2e

SONNET = Settings().allowed_model_ids[1]  # an allowed model besides the default


def test_a_new_chat_from_a_preset_shows_its_prompts_and_its_settings_can_be_overridden(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a project with a preset
    owner = api(user)
    project = owner.post("/projects", {"name": "Bakery"}).body["id"]
    preset = owner.post(
        f"/projects/{project}/presets",
        {
            "name": "Copywriter",
            "contextPrompts": [{"role": "user", "content": "Write blurbs for our bread."}],
            "settings": {"temperature": 0.2},
        },
    )
    assert preset.status == 201, preset
    sign_in(page, console, user)
    # When a new chat starts from it
    page.get_by_label("Start from preset").select_option(label="Copywriter")
    page.get_by_label("Message", exact=True).fill("Rye loaf")
    page.get_by_label("Message", exact=True).press("Enter")
    expect(page.locator(".message.assistant[data-status]")).to_be_visible()
    expect(page.locator("#preset-pick")).to_be_hidden()
    # Then the model's view shows the preset's prompts and its temperature
    page.get_by_role("tab", name="What the model sees").click()
    view = page.locator("#context-view")
    expect(view.locator('[data-layer="prompts"]')).to_contain_text("Write blurbs for our bread.")
    expect(view.locator('[data-layer="settings"]')).to_contain_text("temperature 0.2")
    # When the thread overrides its temperature, then follows again
    page.locator("#thread-settings-box summary").click()
    page.get_by_label("Temperature (0–1)", exact=True).fill("0.9")
    page.get_by_role("button", name="Save overrides").click()
    expect(view.locator('[data-layer="settings"]')).to_contain_text("temperature 0.9")
    page.get_by_role("button", name="Follow preset and project").click()
    expect(view.locator('[data-layer="settings"]')).to_contain_text("temperature 0.2")


def test_a_preset_is_added_from_the_project_panel(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    api(user).post("/projects", {"name": "Bakery"})
    sign_in(page, console, user)
    page.get_by_role("tab", name="Project").click()
    page.locator("#preset-add summary").click()
    page.locator("#preset-name").fill("Terse")
    page.locator("#preset-prompts").fill("user: Answer in one line.\nassistant: Understood.")
    page.locator("#preset-no-summary").check()
    page.get_by_role("button", name="Save preset").click()
    expect(page.locator("#preset-list")).to_contain_text("Terse (2 prompts)")
    expect(page.get_by_label("Start from preset")).to_contain_text("Terse")


def test_the_preset_form_sets_a_model_and_max_tokens_shown_after_a_reload(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    owner = api(user)
    project = owner.post("/projects", {"name": "Bakery"}).body["id"]
    sign_in(page, console, user)
    page.get_by_role("tab", name="Project").click()
    page.locator("#preset-add summary").click()
    page.locator("#preset-name").fill("Long form")
    page.get_by_label("Model id (empty follows the project)").fill("a-model-nobody-serves")
    page.get_by_label("Max output tokens (empty follows the project)").fill("99999")
    # When
    page.get_by_role("button", name="Save preset").click()
    # Then: the API's words, with the models it allows
    alert = page.locator(".alert").last
    expect(alert).to_contain_text("Could not save the preset")
    expect(alert).to_contain_text("settings.maxTokens: from 1 to")
    expect(alert).to_contain_text(SONNET)
    # When: values it allows
    page.get_by_label("Model id (empty follows the project)").fill(SONNET)
    page.get_by_label("Max output tokens (empty follows the project)").fill("512")
    page.get_by_role("button", name="Save preset").click()
    page.reload()
    page.wait_for_selector('body[data-ready="console"]')
    page.get_by_role("tab", name="Project").click()
    # Then
    shown = page.locator("#preset-list li", has_text="Long form")
    expect(shown).to_contain_text(f"model {SONNET} · up to 512 tokens")
    # When: edited
    shown.get_by_role("button", name="Edit").click()
    expect(page.locator("#preset-form-title")).to_have_text("Edit Long form")
    expect(page.get_by_label("Model id (empty follows the project)")).to_have_value(SONNET)
    expect(page.get_by_label("Max output tokens (empty follows the project)")).to_have_value("512")
    page.get_by_label("Max output tokens (empty follows the project)").fill("256")
    page.get_by_role("button", name="Save preset").click()
    # Then
    expect(shown).to_contain_text(f"model {SONNET} · up to 256 tokens")
    presets = owner.get(f"/projects/{project}/presets").body["presets"]
    assert [(p["name"], p["settings"]["model"], p["settings"]["maxTokens"]) for p in presets] == [
        ("Long form", SONNET, 256)
    ]
