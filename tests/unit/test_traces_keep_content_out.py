"""What users write stays out of X-Ray: every function runs with ``Tracing: Active``, and
Powertools' ``Tracer`` would by default attach each handler's answer (message text, memory
values, exports) and error to its subsegment as metadata. The handler wrapper is run in a
fresh interpreter set up as Lambda sets it, with a stand-in X-Ray daemon on a local UDP
port recording every document the SDK sends."""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys

from local import template

ROOT = Path(__file__).resolve().parents[2]
ANSWER = "quokka-lantern diagnosis"
FAILURE = "zanzibar-umbrella failure"
TRACE = "1-5759e988-bd862e3fe1be46a994272793"

# Runs as Lambda would with tracing on: the daemon address, the trace header and a task
# root (which makes Powertools trace at all). Prints every document the daemon received.
PROBE = f"""
import json, os, socket
daemon = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
daemon.bind(("127.0.0.1", 0))
daemon.settimeout(0.5)
os.environ.update({{
    "LAMBDA_TASK_ROOT": "/var/task",
    "AWS_LAMBDA_FUNCTION_NAME": "ProbeFunction",
    "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:%d" % daemon.getsockname()[1],
    "_X_AMZN_TRACE_ID": "Root={TRACE};Parent=53995c3f42cd8ad8;Sampled=1",
}})
from recall.observability import tracer

@tracer.capture_lambda_handler
def answer(event, context):
    return {{"statusCode": 200, "body": {ANSWER!r}}}

@tracer.capture_lambda_handler
def fail(event, context):
    raise ValueError(["an object", {FAILURE!r}])

answer({{}}, None)
try:
    fail({{}}, None)
except ValueError:
    pass
documents = []
try:
    while True:
        documents.append(daemon.recvfrom(65536)[0].decode().split("\\n", 1)[1])
except TimeoutError:
    pass
print(json.dumps(documents))
"""


def traced_subsegments() -> dict[str, dict[str, object]]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("POWERTOOLS_", "_X_AMZN", "AWS_XRAY"))
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "layers" / "recall"), str(ROOT)])
    run = subprocess.run(  # noqa: S603 (our own interpreter and probe, fixed arguments)
        [sys.executable, "-c", PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    documents = [json.loads(document) for document in json.loads(run.stdout)]
    return {str(document["name"]): document for document in documents}


def test_a_traced_handler_sends_x_ray_neither_its_answer_nor_its_error_object() -> None:
    # When a traced handler answers and another raises, with tracing on as in Lambda
    subsegments = traced_subsegments()
    # Then both are traced, with their annotations
    assert set(subsegments) == {"## answer", "## fail"}, subsegments
    assert subsegments["## answer"]["annotations"] == {"ColdStart": True, "Service": "recall"}
    # And neither carries metadata: no answer's body, no error object
    assert [name for name, segment in subsegments.items() if "metadata" in segment] == []
    assert ANSWER not in json.dumps(subsegments)


def test_every_deployed_function_defaults_its_tracer_to_capture_nothing() -> None:
    # Given the environment every function gets from the Globals
    variables = template.load()["Globals"]["Function"]["Environment"]["Variables"]
    # Then Powertools' own defaults are off too, for any method traced later
    assert variables["POWERTOOLS_TRACER_CAPTURE_RESPONSE"] == "false"
    assert variables["POWERTOOLS_TRACER_CAPTURE_ERROR"] == "false"
