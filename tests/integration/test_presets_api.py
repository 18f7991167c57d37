"""Presets through the real handlers: editors make them, viewers read them, each project
sees only its own; a thread started from one sends its prompts and settings to the model,
follows it until it overrides a setting, and follows again once its overrides are
dropped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
from botocore.stub import Stubber
import pytest

from local.seed import grow_thread
from recall.domain.jobs import AnyJob, ExtractJob
from recall.providers.bedrock import BedrockProvider
from recall.settings import get_settings
from recall.store.jobs import JobQueue
from recall.store.presets import PresetStore
from recall.wiring import job_runner, model_choice, preset_store, stream_links
from tests.integration.conftest import Api
from tests.integration.test_chat_over_websocket import RecordingLinks, Socket

MakeProject = Callable[..., str]
SONNET = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

COPYWRITER: dict[str, Any] = {
    "name": "Copywriter",
    "contextPrompts": [
        {"role": "user", "content": "You write product blurbs for our shop."},
        {"role": "assistant", "content": "Understood: two sentences, no superlatives."},
    ],
    "settings": {"model": SONNET, "temperature": 0.2, "maxTokens": 300},
}


def make_preset(api: Api, project: str, body: dict[str, Any] | None = None) -> str:
    reply = api.post(f"/projects/{project}/presets", body or COPYWRITER)
    assert reply.status == 201, reply
    preset: str = reply.body["id"]
    return preset


def start_thread(api: Api, project: str, preset: str) -> str:
    reply = api.post(f"/projects/{project}/conversations", {"presetId": preset})
    assert reply.status == 201, reply
    thread: str = reply.body["id"]
    return thread


def context_of(api: Api, project: str, thread: str) -> Any:
    reply = api.get(f"/projects/{project}/conversations/{thread}/context")
    assert reply.status == 200, reply
    return reply.body


def test_an_editor_creates_a_preset_and_a_viewer_reads_it(
    alice: Api, bob: Api, carol: Api, make_project: MakeProject
) -> None:
    project = make_project(alice, {bob: "viewer", carol: "editor"})
    preset = make_preset(carol, project)
    listed = bob.get(f"/projects/{project}/presets")
    assert listed.status == 200
    [shown] = listed.body["presets"]
    assert (shown["id"], shown["name"]) == (preset, "Copywriter")
    assert shown["contextPrompts"] == COPYWRITER["contextPrompts"]
    assert shown["settings"]["temperature"] == 0.2
    assert shown["settings"]["useSummary"] is None
    assert bob.get(f"/projects/{project}/presets/{preset}").body == shown


def test_a_viewer_cannot_create_change_or_delete_a_preset(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    project = make_project(alice, {bob: "viewer"})
    preset = make_preset(alice, project)
    assert bob.post(f"/projects/{project}/presets", COPYWRITER).status == 403
    assert bob.patch(f"/projects/{project}/presets/{preset}", {"name": "Mine"}).status == 403
    assert bob.delete(f"/projects/{project}/presets/{preset}").status == 403
    assert alice.get(f"/projects/{project}/presets/{preset}").body["name"] == "Copywriter"


def test_a_stranger_sees_no_preset(alice: Api, bob: Api, make_project: MakeProject) -> None:
    project = make_project(alice)
    preset = make_preset(alice, project)
    assert bob.get(f"/projects/{project}/presets").status == 403
    assert bob.get(f"/projects/{project}/presets/{preset}").status == 403


def test_a_preset_belongs_to_its_project_only(alice: Api, make_project: MakeProject) -> None:
    first, second = make_project(alice), make_project(alice)
    preset = make_preset(alice, first)
    assert alice.get(f"/projects/{second}/presets").body == {"presets": []}
    assert alice.get(f"/projects/{second}/presets/{preset}").status == 404
    assert alice.delete(f"/projects/{second}/presets/{preset}").status == 404
    refused = alice.post(f"/projects/{second}/conversations", {"presetId": preset})
    assert refused.status == 422
    assert refused.body["error"]["details"][0]["field"] == "presetId"
    refused = alice.post(f"/projects/{second}/chat", {"message": "hi", "presetId": preset})
    assert refused.status == 422


def test_a_preset_change_replaces_only_the_parts_given(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    preset = make_preset(alice, project)
    reply = alice.patch(
        f"/projects/{project}/presets/{preset}", {"settings": {"useSummary": False}}
    )
    assert reply.status == 200
    assert reply.body["name"] == "Copywriter"
    assert reply.body["contextPrompts"] == COPYWRITER["contextPrompts"]
    assert reply.body["settings"]["useSummary"] is False
    assert reply.body["settings"]["temperature"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**COPYWRITER, "settings": {"temperature": 1.5}}, "settings.temperature"),
        ({**COPYWRITER, "settings": {"maxTokens": 10**6}}, "settings.maxTokens"),
        ({**COPYWRITER, "settings": {"windowMessages": 0}}, "settings.windowMessages"),
        ({**COPYWRITER, "settings": {"model": "someone.elses-model"}}, "settings.model"),
        ({**COPYWRITER, "name": " "}, "name"),
        (
            {**COPYWRITER, "contextPrompts": [{"role": "user", "content": "x" * 2001}]},
            "contextPrompts.0.content",
        ),
        (
            {**COPYWRITER, "contextPrompts": [{"role": "user", "content": "hi"}] * 9},
            "contextPrompts",
        ),
    ],
)
def test_a_preset_out_of_bounds_is_422_naming_the_field(
    alice: Api, make_project: MakeProject, body: dict[str, Any], field: str
) -> None:
    project = make_project(alice)
    reply = alice.post(f"/projects/{project}/presets", body)
    assert reply.status == 422, reply
    assert field in [detail["field"] for detail in reply.body["error"]["details"]]


def test_a_turn_and_a_setting_refuse_an_unknown_model_alike_listing_every_model_once(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    turn = alice.post(f"/projects/{project}/chat", {"message": "hi", "model": "nope"})
    setting = alice.patch(f"/projects/{project}", {"settings": {"model": "nope"}})
    [said_by_turn] = turn.body["error"]["details"]
    [said_by_setting] = setting.body["error"]["details"]
    settings = get_settings()
    assert said_by_turn["allowed"] == said_by_setting["allowed"]
    assert said_by_turn["allowed"][0] == settings.default_model_id
    assert sorted(said_by_turn["allowed"]) == sorted(
        {settings.default_model_id, *settings.allowed_model_ids}
    )


def test_a_project_holds_at_most_presets_max_presets(alice: Api, make_project: MakeProject) -> None:
    project = make_project(alice)
    limit = get_settings().presets_max
    made = [make_preset(alice, project, {"name": f"Preset {n}"}) for n in range(limit)]
    assert alice.post(f"/projects/{project}/presets", {"name": "One more"}).status == 409
    assert alice.delete(f"/projects/{project}/presets/{made[0]}").status == 204
    assert alice.post(f"/projects/{project}/presets", {"name": "One more"}).status == 201


def test_a_thread_follows_its_preset_until_it_overrides_and_again_after_null(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    preset = make_preset(alice, project)
    thread = start_thread(alice, project, preset)
    settings = context_of(alice, project, thread)["settings"]
    assert (settings["model"], settings["temperature"], settings["maxTokens"]) == (
        SONNET,
        0.2,
        300,
    )
    # When the thread overrides one setting
    patched = alice.patch(
        f"/projects/{project}/conversations/{thread}", {"settings": {"temperature": 0.9}}
    )
    assert patched.status == 200
    assert patched.body["settings"]["temperature"] == 0.9
    assert patched.body["presetId"] == preset
    settings = context_of(alice, project, thread)["settings"]
    # Then the others still follow the preset
    assert (settings["temperature"], settings["maxTokens"], settings["model"]) == (
        0.9,
        300,
        SONNET,
    )
    # And the project's defaults show through where the preset sets nothing
    alice.patch(f"/projects/{project}", {"settings": {"windowMessages": 8, "maxTokens": 500}})
    settings = context_of(alice, project, thread)["settings"]
    assert (settings["windowMessages"], settings["maxTokens"]) == (8, 300)
    # When the overrides are dropped, the thread follows again
    restored = alice.patch(f"/projects/{project}/conversations/{thread}", {"settings": None})
    assert restored.status == 200
    assert restored.body["settings"] is None
    assert context_of(alice, project, thread)["settings"]["temperature"] == 0.2


def test_a_thread_whose_overrides_all_stopped_one_by_one_follows_again(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a thread overriding two settings
    project = make_project(alice)
    thread = alice.post(f"/projects/{project}/conversations", {}).body["id"]
    path = f"/projects/{project}/conversations/{thread}"
    assert alice.patch(path, {"settings": {"temperature": 0.9, "maxTokens": 300}}).status == 200
    # When each stops overriding, in its own PATCH
    assert alice.patch(path, {"settings": {"temperature": None}}).body["settings"] is not None
    last = alice.patch(path, {"settings": {"maxTokens": None}})
    # Then the thread has no overrides, as one that never had any
    assert (last.status, last.body["settings"]) == (200, None)
    assert alice.get(path).body["conversation"]["settings"] is None
    # And overriding again starts from nothing
    again = alice.patch(path, {"settings": {"useSummary": False}})
    assert again.body["settings"]["useSummary"] is False
    assert again.body["settings"]["temperature"] is None


def test_a_thread_setting_out_of_bounds_is_422(alice: Api, make_project: MakeProject) -> None:
    project = make_project(alice)
    thread = alice.post(f"/projects/{project}/conversations", {}).body["id"]
    reply = alice.patch(
        f"/projects/{project}/conversations/{thread}", {"settings": {"windowMessages": 10**4}}
    )
    assert reply.status == 422
    assert reply.body["error"]["details"][0]["field"] == "settings.windowMessages"
    assert alice.patch(f"/projects/{project}", {"settings": {"temperature": 2}}).status == 422


@pytest.mark.parametrize(
    "settings",
    [{"maxTokens": True}, {"windowMessages": "7"}, {"temperature": "0.25"}, {"maxTokens": 1.0}],
    ids=["true-is-not-1", "text-is-not-a-number", "text-is-not-a-fraction", "a-fraction"],
)
def test_a_setting_of_the_wrong_type_is_422_on_every_layer_as_a_budget_is(
    alice: Api, make_project: MakeProject, settings: dict[str, Any]
) -> None:
    # Given a project, a thread and a preset
    project = make_project(alice)
    thread = alice.post(f"/projects/{project}/conversations", {}).body["id"]
    [(name, _)] = settings.items()
    # When each layer is given the setting as a type it is not
    replies = [
        alice.patch(f"/projects/{project}", {"settings": settings}),
        alice.patch(f"/projects/{project}/conversations/{thread}", {"settings": settings}),
        alice.post(f"/projects/{project}/presets", {**COPYWRITER, "settings": settings}),
    ]
    # Then each is a 422 naming it, and nothing was stored
    for reply in replies:
        assert reply.status == 422, reply
        assert [d["field"] for d in reply.body["error"]["details"]] == [f"settings.{name}"]
    assert alice.get(f"/projects/{project}").body["settings"][name] is None


def test_a_preset_starts_only_a_new_thread(alice: Api, make_project: MakeProject) -> None:
    project = make_project(alice)
    preset = make_preset(alice, project)
    thread = alice.post(f"/projects/{project}/chat", {"message": "hello"}).body["conversation"][
        "id"
    ]
    reply = alice.post(
        f"/projects/{project}/chat",
        {"message": "again", "conversationId": thread, "presetId": preset},
    )
    assert reply.status == 422
    assert reply.body["error"]["details"][0]["field"] == "presetId"


def test_with_summaries_off_there_is_no_summary_layer_and_the_window_is_its_size(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    preset = make_preset(
        alice,
        project,
        {"name": "Exact", "settings": {"useSummary": False, "windowMessages": 3}},
    )
    first = alice.post(f"/projects/{project}/chat", {"message": "one", "presetId": preset})
    assert first.status == 200, first
    thread = first.body["conversation"]["id"]
    for text in ("two", "three"):
        body = {"message": text, "conversationId": thread}
        assert alice.post(f"/projects/{project}/chat", body).status == 200
    context = context_of(alice, project, thread)
    assert context["summary"] == ""
    assert all("conversation_summary" not in part for part in context["system"])
    assert len(context["window"]) == 3
    assert context["window"][-1]["role"] == "assistant"


def test_without_memory_a_thread_gets_no_memory_block_and_no_memory_tools(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    alice.put(f"/projects/{project}/memories/tone", {"value": "warm", "category": "brand"})
    preset = make_preset(alice, project, {"name": "Clean", "settings": {"sendMemory": False}})
    thread = start_thread(alice, project, preset)
    context = context_of(alice, project, thread)
    assert context["memoryBlock"] == ""
    assert context["tools"] == []
    assert all("warm" not in part for part in context["system"])
    # a thread of the same project without the preset still gets it
    other = alice.post(f"/projects/{project}/conversations", {}).body["id"]
    assert "tone: warm" in context_of(alice, project, other)["memoryBlock"]


@pytest.mark.parametrize(
    "turned_off_by", ["nothing", "its preset", "its own settings", "its project"]
)
def test_background_extraction_never_learns_from_a_thread_without_memory(
    alice: Api, make_project: MakeProject, turned_off_by: str
) -> None:
    # Given a thread stating a rule over six messages, memory turned off by a layer
    project = make_project(alice)
    if turned_off_by == "its preset":
        clean = make_preset(alice, project, {"name": "Clean", "settings": {"sendMemory": False}})
        thread = start_thread(alice, project, clean)
    else:
        thread = alice.post(f"/projects/{project}/conversations", {}).body["id"]
    grow_thread(alice.sub or "", project, thread, 6, lambda _: "Always keep the header dark.")
    off = {"settings": {"sendMemory": False}}
    if turned_off_by == "its own settings":
        assert alice.patch(f"/projects/{project}/conversations/{thread}", off).status == 200
    if turned_off_by == "its project":
        assert alice.patch(f"/projects/{project}", off).status == 200
    # When the worker runs an extraction job for it (one queued before the change, say)
    job_runner().run(
        ExtractJob(user_id=alice.sub or "", project_id=project, conversation_id=thread)
    )
    # Then only a thread that sends memory was learnt from
    learnt = alice.get(f"/projects/{project}/memories").body["memories"]
    assert [entry["source"] for entry in learnt] == (
        ["extracted"] if turned_off_by == "nothing" else []
    )


@pytest.mark.parametrize("sends_memory", [True, False])
def test_a_turn_in_a_thread_without_memory_queues_no_extraction(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch, sends_memory: bool
) -> None:
    # Given a thread of four messages, its preset sending memory or not
    project = make_project(alice)
    settings = {"sendMemory": sends_memory}
    thread = start_thread(
        alice, project, make_preset(alice, project, {"name": "P", "settings": settings})
    )
    grow_thread(alice.sub or "", project, thread, 4)
    queued: list[AnyJob] = []

    def send(_: JobQueue, jobs: list[AnyJob]) -> int:
        queued.extend(jobs)
        return len(jobs)

    monkeypatch.setattr(JobQueue, "send", send)
    # When the turn that makes six messages states a rule
    body = {"message": "Always keep the header dark.", "conversationId": thread}
    assert alice.post(f"/projects/{project}/chat", body).status == 200
    # Then extraction is queued only for a thread that sends memory
    assert [job.kind.value for job in queued] == (["extract"] if sends_memory else [])


@pytest.mark.parametrize("where", ["a preset", "the project", "a thread"])
def test_a_temperature_too_small_to_store_is_422_and_the_smallest_storable_is_kept(
    alice: Api, make_project: MakeProject, where: str
) -> None:
    project = make_project(alice)
    thread = alice.post(f"/projects/{project}/conversations", {}).body["id"]

    def send(temperature: float) -> Any:
        settings = {"settings": {"temperature": temperature}}
        if where == "a preset":
            return alice.post(f"/projects/{project}/presets", {"name": "t", **settings})
        if where == "the project":
            return alice.patch(f"/projects/{project}", settings)
        return alice.patch(f"/projects/{project}/conversations/{thread}", settings)

    # DynamoDB stores no magnitude under 1e-130 (moto does): refused before the store
    refused = send(1e-200)
    assert refused.status == 422, refused
    assert [d["field"] for d in refused.body["error"]["details"]] == ["settings.temperature"]
    assert send(5e-324).status == 422
    kept = send(1e-130)
    assert kept.status in (200, 201), kept


def test_a_deleted_preset_leaves_its_threads_their_copy(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    preset = make_preset(alice, project)
    thread = start_thread(alice, project, preset)
    assert alice.delete(f"/projects/{project}/presets/{preset}").status == 204
    assert alice.get(f"/projects/{project}/presets/{preset}").status == 404
    shown = alice.get(f"/projects/{project}/conversations/{thread}").body["conversation"]
    assert (shown["presetId"], shown["presetName"]) == (preset, "Copywriter")
    context = context_of(alice, project, thread)
    assert context["contextPrompts"] == COPYWRITER["contextPrompts"]
    assert context["settings"]["temperature"] == 0.2


def test_deleting_a_project_deletes_its_presets(alice: Api, make_project: MakeProject) -> None:
    project = make_project(alice)
    make_preset(alice, project)
    make_preset(alice, project, {"name": "Second"})
    store: PresetStore = preset_store()
    assert len(store.all(project)) == 2
    assert alice.delete(f"/projects/{project}").status == 204
    assert store.all(project) == []


@pytest.fixture
def bedrock() -> Iterator[tuple[BedrockProvider, Stubber, list[dict[str, Any]]]]:
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    sent: list[dict[str, Any]] = []

    def capture(params: dict[str, Any], **kwargs: Any) -> None:
        sent.append(params)

    client.meta.events.register("before-parameter-build.bedrock-runtime.Converse", capture)
    with Stubber(client) as stubber:
        model_choice().use(BedrockProvider(client))
        yield BedrockProvider(client), stubber, sent
        model_choice().use(None)
        stubber.assert_no_pending_responses()


def test_a_thread_from_a_preset_sends_its_prompts_and_settings_to_bedrock(
    alice: Api,
    make_project: MakeProject,
    bedrock: tuple[BedrockProvider, Stubber, list[dict[str, Any]]],
) -> None:
    _, stubber, sent = bedrock
    stubber.add_response(
        "converse",
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "A blurb."}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 50, "outputTokens": 10, "totalTokens": 60},
            "metrics": {"latencyMs": 10},
        },
    )
    project = make_project(alice)
    preset = make_preset(alice, project)
    reply = alice.post(
        f"/projects/{project}/chat", {"message": "Blurb for rye bread", "presetId": preset}
    )
    assert reply.status == 200, reply
    [request] = sent
    assert request["modelId"] == SONNET
    assert request["inferenceConfig"] == {"maxTokens": 300, "temperature": 0.2}
    texts = [
        (message["role"], block["text"])
        for message in request["messages"]
        for block in message["content"]
        if "text" in block
    ]
    assert texts == [
        ("user", "You write product blurbs for our shop."),
        ("assistant", "Understood: two sentences, no superlatives."),
        ("user", "Blurb for rye bread"),
    ]
    shown = alice.get(f"/projects/{project}/conversations/{reply.body['conversation']['id']}")
    assert shown.body["conversation"]["presetId"] == preset


def test_a_streamed_first_turn_starts_its_thread_from_a_preset(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    preset = make_preset(alice, project)
    links = RecordingLinks()
    stream_links().use(links)
    try:
        frames = Socket(alice, links).send(
            {
                "action": "chat",
                "projectId": project,
                "body": {"message": "Blurb for rye bread", "presetId": preset},
            }
        )
    finally:
        stream_links().use(None)
    done = frames[-1]
    assert (done["type"], done["status"]) == ("done", 200), frames
    thread = done["body"]["conversation"]["id"]
    shown = alice.get(f"/projects/{project}/conversations/{thread}").body["conversation"]
    assert shown["presetId"] == preset


def test_a_window_larger_than_the_default_page_holds_every_message_it_keeps(
    alice: Api, make_project: MakeProject
) -> None:
    # Given: a thread keeping 80 messages, 200 long, one turn in
    project = make_project(alice)
    preset = make_preset(alice, project, {"name": "Long", "settings": {"windowMessages": 80}})
    first = alice.post(f"/projects/{project}/chat", {"message": "one", "presetId": preset})
    assert first.status == 200, first
    thread = first.body["conversation"]["id"]
    grow_thread(str(alice.sub), project, thread, 200)
    # When: turns go on past the default page (WINDOW_PAGE_MESSAGES)
    for text in ("two", "three"):
        body = {"message": text, "conversationId": thread}
        assert alice.post(f"/projects/{project}/chat", body).status == 200
    # Then: the window holds its own size, not the page's
    window = context_of(alice, project, thread)["window"]
    assert len(window) > get_settings().window_page_messages
    assert len(window) >= 80
    assert (
        window[-1]["content"]
        == alice.get(f"/projects/{project}/conversations/{thread}", query="limit=1").body[
            "messages"
        ][-1]["content"]
    )


@pytest.mark.parametrize(("name", "largest"), [("windowMessages", 100), ("maxTokens", 8_192)])
def test_the_largest_thread_setting_is_taken_and_one_more_is_422(
    alice: Api, make_project: MakeProject, name: str, largest: int
) -> None:
    project = make_project(alice)
    thread = alice.post(f"/projects/{project}/conversations", {}).body["id"]
    path = f"/projects/{project}/conversations/{thread}"
    taken = alice.patch(path, {"settings": {name: largest}})
    over = alice.patch(path, {"settings": {name: largest + 1}})
    assert taken.status == 200, taken
    assert taken.body["settings"][name] == largest
    assert over.status == 422
    assert over.body["error"]["details"][0]["field"] == f"settings.{name}"


def test_a_preset_name_of_80_characters_is_kept_and_one_of_81_is_422(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    kept = alice.post(f"/projects/{project}/presets", {**COPYWRITER, "name": "n" * 80})
    over = alice.post(f"/projects/{project}/presets", {**COPYWRITER, "name": "m" * 81})
    assert kept.status == 201, kept
    assert kept.body["name"] == "n" * 80
    assert over.status == 422
    assert over.body["error"]["details"][0]["field"] == "name"


@pytest.mark.parametrize("cleared", [{}, None], ids=["empty", "null"])
def test_a_project_s_settings_are_dropped_by_null_as_a_thread_s_are(
    alice: Api, make_project: MakeProject, cleared: dict[str, Any] | None
) -> None:
    # Given a project with default settings
    project = make_project(alice)
    set_ = alice.patch(f"/projects/{project}", {"settings": {"maxTokens": 500}})
    assert set_.body["settings"]["maxTokens"] == 500
    # When its settings are given as {} or null
    reply = alice.patch(f"/projects/{project}", {"settings": cleared})
    # Then it sets none, as a thread's PATCH with null drops its overrides
    assert reply.status == 200, reply
    assert reply.body["settings"]["maxTokens"] is None
    # And a PATCH naming nothing is still a 422
    assert alice.patch(f"/projects/{project}", {}).status == 422
