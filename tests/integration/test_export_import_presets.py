"""Export and import carry presets and thread settings: a thread comes back running with
the context prompts and settings it had, whether or not its preset came too; the project's
presets come back where no preset has their name and there is room, and a version 1
document, which has none of these, still imports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from recall.wiring import data_service, preset_store
from tests.integration.conftest import Api
from tests.integration.test_export_and_import import import_done, say
from tests.integration.test_presets_api import (
    COPYWRITER,
    SONNET,
    context_of,
    make_preset,
    start_thread,
)

MakeProject = Callable[..., str]
Drain = Callable[[], None]

EDITOR: dict[str, Any] = {
    "name": "Editor",
    "contextPrompts": [{"role": "user", "content": "You tighten drafts to half their length."}],
    "settings": {"temperature": 0.1},
}


@pytest.fixture
def presets_max() -> Iterator[Callable[[int], None]]:
    """A lower PRESETS_MAX on the wired preset store, restored afterwards."""
    store = preset_store()
    original = store._max

    def use(limit: int) -> None:
        store._max = limit

    yield use
    store._max = original


def _exported(api: Api, project: str) -> dict[str, Any]:
    reply = api.get(f"/projects/{project}/export")
    assert reply.status == 200, reply
    assert reply.body["version"] == 2
    body: dict[str, Any] = reply.body
    return body


def _only_thread(api: Api, project: str) -> str:
    [row] = api.get(f"/projects/{project}/conversations").body["conversations"]
    thread: str = row["id"]
    return thread


def _presets(api: Api, project: str) -> dict[str, Any]:
    reply = api.get(f"/projects/{project}/presets")
    assert reply.status == 200, reply
    return {preset["name"]: preset for preset in reply.body["presets"]}


def test_a_thread_comes_back_with_its_preset_its_settings_and_runs_the_same(
    alice: Api, make_project: MakeProject, drain: Drain
) -> None:
    # Given a thread from a preset that overrides one setting, in a project with two presets
    source = make_project(alice)
    preset = make_preset(alice, source)
    make_preset(alice, source, EDITOR)
    thread = start_thread(alice, source, preset)
    say(alice, source, "Blurb for the lavender candle", thread)
    patched = alice.patch(
        f"/projects/{source}/conversations/{thread}", {"settings": {"temperature": 0.9}}
    )
    assert patched.status == 200, patched
    before = context_of(alice, source, thread)
    exported = _exported(alice, source)
    # When it is imported into another project
    target = make_project(alice)
    progress = import_done(alice, target, exported, drain)
    # Then the presets came too, and the thread runs with the same prompts and settings
    assert progress["status"] == "done" and progress["errors"] == [], progress
    assert progress["presetsDone"] == 2
    imported = _presets(alice, target)
    assert set(imported) == {"Copywriter", "Editor"}
    assert imported["Copywriter"]["contextPrompts"] == COPYWRITER["contextPrompts"]
    copy = _only_thread(alice, target)
    after = context_of(alice, target, copy)
    assert after["contextPrompts"] == before["contextPrompts"]
    assert after["settings"] == before["settings"]
    assert (after["settings"]["model"], after["settings"]["temperature"]) == (SONNET, 0.9)
    shown = alice.get(f"/projects/{target}/conversations/{copy}").body["conversation"]
    assert shown["settings"] == patched.body["settings"]
    # and its preset id names the imported preset, not the source project's
    assert shown["presetId"] == imported["Copywriter"]["id"] != preset
    assert say(alice, target, "And one for the cedar candle", copy)["conversation"]["id"] == copy


def test_a_thread_whose_preset_is_gone_still_runs_with_its_copy(
    alice: Api, make_project: MakeProject, drain: Drain
) -> None:
    # Given a thread whose preset was deleted before the export
    source = make_project(alice)
    preset = make_preset(alice, source)
    thread = start_thread(alice, source, preset)
    assert alice.delete(f"/projects/{source}/presets/{preset}").status == 204
    before = context_of(alice, source, thread)
    exported = _exported(alice, source)
    assert exported["presets"] == []
    assert exported["conversations"][0]["preset"]["presetId"] == preset
    # When it is imported
    target = make_project(alice)
    progress = import_done(alice, target, exported, drain)
    # Then its preset id names nothing there, which changes nothing
    assert progress["status"] == "done" and progress["errors"] == [], progress
    copy = _only_thread(alice, target)
    shown = alice.get(f"/projects/{target}/conversations/{copy}").body["conversation"]
    assert (shown["presetId"], shown["presetName"]) == (preset, "Copywriter")
    assert alice.get(f"/projects/{target}/presets/{preset}").status == 404
    after = context_of(alice, target, copy)
    assert (after["contextPrompts"], after["settings"]) == (
        before["contextPrompts"],
        before["settings"],
    )
    assert say(alice, target, "Blurb for the fig candle", copy)["conversation"]["id"] == copy


def test_an_imported_preset_never_replaces_one_of_the_same_name(
    alice: Api, make_project: MakeProject, drain: Drain
) -> None:
    # Given an export with two presets, and a target project with its own "Copywriter"
    source = make_project(alice)
    make_preset(alice, source)
    make_preset(alice, source, EDITOR)
    exported = _exported(alice, source)
    target = make_project(alice)
    own = {**COPYWRITER, "contextPrompts": [{"role": "user", "content": "Ours, not theirs."}]}
    kept = make_preset(alice, target, own)
    # When the export is imported, twice
    progress = import_done(alice, target, exported, drain)
    again = import_done(alice, target, exported, drain)
    # Then the project's own preset is as it was, the other came in once
    presets = _presets(alice, target)
    assert set(presets) == {"Copywriter", "Editor"}
    assert presets["Copywriter"]["id"] == kept
    assert presets["Copywriter"]["contextPrompts"] == own["contextPrompts"]
    assert progress["presetsDone"] == 1
    assert progress["errors"] == [
        "Preset 'Copywriter' was not imported: the project has a preset of that name."
    ]
    assert again == progress


def test_presets_past_presets_max_are_reported_and_not_imported(
    alice: Api,
    make_project: MakeProject,
    drain: Drain,
    presets_max: Callable[[int], None],
) -> None:
    # Given an export with two presets, and a target with room for one more only
    source = make_project(alice)
    make_preset(alice, source)
    make_preset(alice, source, EDITOR)
    exported = _exported(alice, source)
    target = make_project(alice)
    make_preset(alice, target, {"name": "Ours"})
    presets_max(2)
    # When
    progress = import_done(alice, target, exported, drain)
    # Then the first fits and the second is reported
    assert set(_presets(alice, target)) == {"Ours", "Copywriter"}
    assert progress["presetsDone"] == 1
    assert [error for error in progress["errors"] if "PRESETS_MAX" in error] == [
        "Preset 'Editor' was not imported: the project has as many presets as PRESETS_MAX allows."
    ]


def test_a_viewer_exports_the_projects_presets_but_not_others_threads(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    project = make_project(alice, {bob: "viewer"})
    start_thread(alice, project, make_preset(alice, project))
    exported = _exported(bob, project)
    assert [preset["name"] for preset in exported["presets"]] == ["Copywriter"]
    assert exported["conversations"] == []


def test_a_version_1_document_imports_and_may_not_carry_version_2_fields(
    alice: Api, make_project: MakeProject, drain: Drain
) -> None:
    # Given a version 1 export: no presets, no thread settings
    source = make_project(alice)
    say(alice, source, "Plan the spring sale")
    document = _exported(alice, source)
    for thread in document["conversations"]:
        del thread["preset"], thread["settings"]
    del document["presets"]
    older = {**document, "version": 1}
    # When it is imported
    target = make_project(alice)
    progress = import_done(alice, target, older, drain)
    # Then
    assert progress["status"] == "done" and progress["threadsDone"] == 1, progress
    # But a version 1 document that carries presets is refused
    carrying = {**older, "presets": [{**EDITOR, "id": "x", "createdAt": "", "updatedAt": ""}]}
    refused = alice.post(f"/projects/{target}/import", carrying)
    assert refused.status == 422, refused
    assert "version 2" in str(refused.body)


def test_presets_and_thread_settings_out_of_bounds_are_named_and_nothing_starts(
    alice: Api, make_project: MakeProject
) -> None:
    # Given an export whose preset's prompt is too long and whose thread asks for a model
    # this deployment does not allow
    source = make_project(alice)
    thread = start_thread(alice, source, make_preset(alice, source))
    alice.patch(f"/projects/{source}/conversations/{thread}", {"settings": {"temperature": 0.5}})
    document = _exported(alice, source)
    document["presets"][0]["contextPrompts"][0]["content"] = "x" * 2_001
    document["conversations"][0]["settings"]["model"] = "not-a-model"
    # When
    reply = alice.post(f"/projects/{make_project(alice)}/import", document)
    # Then
    assert reply.status == 422, reply
    fields = {detail["field"] for detail in reply.body["error"]["details"]}
    assert fields == {"presets.0.contextPrompts.0.content", "conversations.0.settings.model"}


def test_a_chunk_run_again_after_a_crash_counts_the_presets_it_created(
    alice: Api, make_project: MakeProject, drain: Drain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an export with a preset, and a worker that crashes the first time it counts
    source = make_project(alice)
    make_preset(alice, source)
    exported = _exported(alice, source)
    store = data_service()._imports
    count = store.chunk_done
    crashes = [RuntimeError("the worker stopped")]

    def crash_once(*args: Any, **kwargs: Any) -> Any:
        if crashes:
            raise crashes.pop()
        return count(*args, **kwargs)

    monkeypatch.setattr(store, "chunk_done", crash_once)
    # When it is imported, the chunk running again
    target = make_project(alice)
    progress = import_done(alice, target, exported, drain)
    # Then the preset is there once, counted, with nothing reported
    assert not crashes
    assert list(_presets(alice, target)) == ["Copywriter"]
    assert (progress["status"], progress["presetsDone"], progress["errors"]) == ("done", 1, [])


def test_two_presets_of_one_name_both_come_back_with_their_own_prompts(
    alice: Api, make_project: MakeProject, drain: Drain
) -> None:
    # Given a project with two presets named alike, a thread started from the second
    source = make_project(alice)
    make_preset(alice, source)
    second = {**COPYWRITER, "contextPrompts": [{"role": "user", "content": "The second one."}]}
    make_preset(alice, source, second)
    exported = _exported(alice, source)
    target = make_project(alice)
    # When its export is imported elsewhere
    progress = import_done(alice, target, exported, drain)
    # Then both are there, each with its prompts, and nothing is reported lost
    listed = alice.get(f"/projects/{target}/presets").body["presets"]
    prompts = sorted(row["contextPrompts"][0]["content"] for row in listed)
    assert prompts == sorted([COPYWRITER["contextPrompts"][0]["content"], "The second one."])
    assert (progress["presetsDone"], progress["errors"]) == (2, [])


def test_a_chunk_run_again_after_creating_one_of_two_presets_alike_creates_the_other(
    alice: Api, make_project: MakeProject, drain: Drain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an export with two presets of one name, and a store that fails the second
    # creation once, after the first was made (the queue runs the chunk again)
    source = make_project(alice)
    make_preset(alice, source)
    make_preset(alice, source, {**COPYWRITER, "contextPrompts": [{"role": "user", "content": "2"}]})
    exported = _exported(alice, source)
    target = make_project(alice)
    store = preset_store()
    create, calls = store.create, []

    def fails_once_on_the_second(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the worker stopped")
        create(*args, **kwargs)

    monkeypatch.setattr(store, "create", fails_once_on_the_second)
    # When it is imported, the chunk running again after the failure
    progress = import_done(alice, target, exported, drain)
    # Then the first run's preset does not keep the second out: both are there
    assert len(calls) == 3
    assert (progress["presetsDone"], progress["errors"]) == (2, [])
    assert len(alice.get(f"/projects/{target}/presets").body["presets"]) == 2
