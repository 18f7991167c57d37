"""``make job`` and the local-only route it calls, ``POST /_local/jobs/<job>``: one
maintenance job (or a drain) at once on the running server's data, or, with no server,
on a fresh embedded store."""

from __future__ import annotations

from collections.abc import Callable
import json
import os
import subprocess
import sys

import pytest

from local import embedded, server, template
from local.background import job_names
from local.tokens import demo_token
from tests.e2e.conftest import Caller

pytestmark = pytest.mark.e2e


def make_job(job: str, port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 (our own interpreter and module, fixed arguments)
        [sys.executable, "-m", "local.job", job],
        cwd=template.ROOT,
        env={**os.environ, "PORT": str(port)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_job_names_are_the_schedules_jobs_and_drain() -> None:
    # When
    names = job_names()
    # Then
    assert names == [
        json.loads(event["Properties"]["Input"])["job"]
        for event in template.resources("AWS::Serverless::Function")["MaintenanceFunction"][
            "Properties"
        ]["Events"].values()
    ] + ["drain"]
    assert {"consolidate", "prune-sessions", "expire-memories", "drain"} == set(names)


def test_the_local_job_route_runs_a_maintenance_job_for_a_local_token(
    caller: Callable[[str | None], Caller],
) -> None:
    # When
    reply = caller("developer").post("/_local/jobs/prune-sessions")
    # Then
    assert reply.status == 200, reply
    assert reply.body["job"] == "prune-sessions"
    assert {"read", "changed"} <= set(reply.body)


@pytest.mark.parametrize(
    ("path", "headers", "body"),
    [
        ("/_local/jobs/prune-sessions", {}, None),
        # what any page open in the browser can send: a form posted across sites
        (
            "/_local/jobs/drain",
            {
                "Content-Type": "application/x-www-form-urlencoded",
                "Origin": "https://evil.example",
            },
            b"run=1",
        ),
        ("/_local/jobs/drain", {"Authorization": f"Bearer {demo_token('x', exp=1)}"}, None),
        ("/_local/anything", {}, None),
    ],
    ids=["no token", "a cross-site form post", "an expired token", "another local route"],
)
def test_every_local_route_refuses_a_caller_without_a_local_token(
    caller: Callable[[str | None], Caller],
    path: str,
    headers: dict[str, str],
    body: bytes | None,
) -> None:
    # When
    reply = caller(None).request("POST", path, raw=body, headers=headers)
    # Then
    assert (reply.status, reply.body) == (401, {"message": "Unauthorized"})


@pytest.mark.parametrize(("method", "path"), [("POST", "nothing"), ("GET", "prune-sessions")])
def test_the_local_job_route_is_404_for_anything_but_a_post_of_a_known_job(
    caller: Callable[[str | None], Caller], method: str, path: str
) -> None:
    # When
    reply = caller("developer").request(method, f"/_local/jobs/{path}")
    # Then
    assert reply.status == 404
    assert reply.body["jobs"] == job_names()


def test_make_job_runs_on_the_server_listening_on_port(local_api: server.LocalApi) -> None:
    # When
    run = make_job("expire-memories", local_api.server.server_address[1])
    # Then
    assert run.returncode == 0, run.stderr
    assert f"on the running server at {local_api.url}" in run.stderr
    assert json.loads(run.stdout)["job"] == "expire-memories"


def test_make_job_without_a_server_runs_on_a_fresh_store() -> None:
    # When
    run = make_job("prune-sessions", embedded.free_port())
    # Then
    assert run.returncode == 0, run.stderr
    assert "no server on" in run.stderr
    assert "fresh embedded store" in run.stderr
    assert json.loads(run.stdout)["job"] == "prune-sessions"


def test_make_job_names_the_jobs_when_given_another() -> None:
    # When
    run = make_job("nothing", embedded.free_port())
    # Then
    assert run.returncode == 2
    assert all(name in run.stderr for name in job_names())
