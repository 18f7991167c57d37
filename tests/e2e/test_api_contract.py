"""The API keeps its published contract: schemathesis sends generated requests, valid and
not, to every operation of the committed OpenAPI document on the local server, and every
answer must carry a status, content type and body the document declares, and never a 5xx."""

from __future__ import annotations

from dataclasses import dataclass
import uuid

from hypothesis import HealthCheck, settings
import pytest
import schemathesis
from schemathesis import Case
from schemathesis.checks import CHECKS
from schemathesis.specs.openapi.checks import unsupported_method

from local import openapi, server
from local.tokens import demo_token
from tests.e2e.conftest import Caller

pytestmark = pytest.mark.e2e

# Small enough that the whole run takes well under a minute on two cores.
EXAMPLES_PER_OPERATION = 30
SEED = 20_251_130
# Twice in full runs a write answered 200 after 12 and 15 s: moto copied every table a
# transaction named, so each transaction slowed as the run's shared store filled (about a
# second at 30,000 items). local/dynamodb_writes.py stops that; the margin over
# schemathesis' 10 s default stays, since the contract is statuses and bodies, not latency.
RESPONSE_TIMEOUT_SECONDS = 30
OWNER = f"contract-{uuid.uuid4().hex[:12]}"


@dataclass
class Seeded:
    """What the owner has before each operation's run, so generated requests reach real
    items, not only 403s and 404s (fresh per operation: a DELETE may remove them)."""

    url: str
    project: str
    conversation: str
    member: str
    memory_key: str


@pytest.fixture
def seeded(local_api: server.LocalApi) -> Seeded:
    owner = Caller(local_api.url, OWNER)
    project = owner.post("/projects", {"name": "Contract", "context": {"type": "store"}})
    assert project.status == 201, project
    base = f"/projects/{project.body['id']}"
    member = f"member-{uuid.uuid4().hex[:12]}"
    assert owner.put(f"{base}/members/{member}", {"role": "editor"}).status == 201
    conversation = owner.post(f"{base}/conversations", {"title": "Seeded"})
    assert conversation.status == 201, conversation
    memory = owner.put(f"{base}/memories/brand.voice", {"value": "Plain", "category": "brand"})
    assert memory.status == 201, memory
    return Seeded(local_api.url, project.body["id"], conversation.body["id"], member, "brand.voice")


schema = schemathesis.openapi.from_path(
    openapi.DOCUMENT,
    config=schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "auth": {"openapi": {"jwt": {"bearer": demo_token(OWNER)}}},
            "generation": {
                "max-examples": EXAMPLES_PER_OPERATION,
                "deterministic": True,
                "database": "none",
            },
            "checks": {
                # JSON Schema cannot say every rule a valid request must keep (visible text,
                # an expiry in the future, scope with conversationId): those break as 422.
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", "401", "403", "404", "409", "422", "429"]
                },
            },
        }
    ),
)


def _seeded_path(case: Case, seeded: Seeded) -> None:
    """Every request works on the seeded project; for the other ids, an even-length
    generated value is swapped for the seeded item, so both hits and misses are sent."""
    parameters = case.path_parameters or {}
    if "projectId" in parameters:
        parameters["projectId"] = seeded.project
    for name, value in (
        ("conversationId", seeded.conversation),
        ("userId", seeded.member),
        ("key", seeded.memory_key),
    ):
        if name in parameters and len(str(parameters[name])) % 2 == 0:
            parameters[name] = value


@schema.parametrize()
# ``seeded`` is meant to last one operation's whole run, not one example.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_operation_answers_only_what_the_document_declares(
    case: Case, seeded: Seeded, local_api: server.LocalApi
) -> None:
    _seeded_path(case, seeded)
    # The offline model never fails, so a 5xx here (even a documented 502-504) is a bug.
    case.call_and_validate(
        base_url=local_api.url,
        checks=CHECKS.get_all(),
        # API Gateway answers a method no route has with 404 {"message"}, never 405.
        excluded_checks=[unsupported_method],
        timeout=RESPONSE_TIMEOUT_SECONDS,
    )


def test_a_json_array_body_is_a_422_not_read_as_its_first_item(seeded: Seeded) -> None:
    # Given
    owner = Caller(seeded.url, OWNER)
    # When
    created = owner.post("/projects", [{"name": "First item"}])
    emptied = owner.post(f"/projects/{seeded.project}/conversations", [None, None])
    # Then
    assert (created.status, emptied.status) == (422, 422)
    assert created.body["error"]["code"] == "validation_error"
