"""What a cold start costs each function (``make bench``): a fresh interpreter imports the
handler module and answers one real event, as a new Lambda instance does, over the
embedded store (the WebSocket functions, whose events need API Gateway's connections, are
left out). A median of CPU times (like ``turns.import_seconds``), less the bare
interpreter, beside the import alone, both as ratios to ``import boto3`` alone: work moved
from the import to the first request shows here as no gain."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
import sys
import tempfile
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Like `local.runtime`, put the layer on the path so `python -m bench...` runs from the root.
if str(ROOT / "layers" / "recall") not in sys.path:
    sys.path.insert(0, str(ROOT / "layers" / "recall"))

from bench.import_times import import_seconds  # noqa: E402
from local import embedded, runtime  # noqa: E402
from local.background import sqs_event  # noqa: E402
from recall.domain.jobs import ConsolidateJob, ScheduledJob  # noqa: E402

USER = "bench-cold-user"

# Each HTTP function's first request: the one its users send most.
FIRST_REQUESTS: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "projects": ("GET", "/projects", None),
    "conversations": ("GET", "/projects/{project}/conversations", None),
    "chat": ("POST", "/projects/{project}/chat", {"message": "What did we settle on?"}),
    "memories": ("GET", "/projects/{project}/memories", None),
    "data": ("GET", "/projects/{project}/export", None),
}
# The scheduled and queued functions: their logical ids, and a job each.
FIRST_JOBS = {"maintenance": "MaintenanceFunction", "worker": "WorkerFunction"}

# Run in the fresh interpreter: nothing of the bench or of moto is loaded there.
ANSWER_ONE = """
import json, sys
sys.path.insert(0, {directory!r})
import app

class Context:
    function_name = {function!r}
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:" + function_name
    aws_request_id = "bench-cold-start"

    def get_remaining_time_in_millis(self):
        return 29_000

with open({event!r}) as source:
    reply = app.lambda_handler(json.load(source), Context())
assert not isinstance(reply, dict) or reply.get("statusCode", 200) < 300, reply
assert not isinstance(reply, dict) or not reply.get("batchItemFailures"), reply
"""


def cold_starts(functions: list[str] | None = None) -> list[tuple[str, float, float]]:
    """``(function, import + first request, import alone)`` in seconds, and first a row
    for ``import boto3`` alone."""
    rows: list[tuple[str, float, float]] = []
    with embedded.running(), tempfile.TemporaryDirectory() as scratch:
        created = runtime.invoke(
            "ProjectsFunction",
            runtime.http_event("POST", "/projects", body={"name": "Cold start"}, sub=USER),
        )
        project = json.loads(created["body"])["id"]
        bare = import_seconds("pass")
        rows.append(("boto3 alone", import_seconds("import boto3") - bare, 0.0))
        for function in functions or sorted([*FIRST_REQUESTS, *FIRST_JOBS]):
            logical, sent = first_event(function, project)
            event = Path(scratch) / f"{function}.json"
            event.write_text(json.dumps(sent))
            directory = str(ROOT / "functions" / function)
            code = ANSWER_ONE.format(directory=directory, function=logical, event=str(event))
            imported = f"import sys; sys.path.insert(0, {directory!r}); import app"
            rows.append((function, import_seconds(code) - bare, import_seconds(imported) - bare))
    return rows


def first_event(function: str, project: str) -> tuple[str, dict[str, Any]]:
    """The function's logical id and the event of its first invocation."""
    if function == "maintenance":
        return FIRST_JOBS[function], {"job": ScheduledJob.CONSOLIDATE.value}
    if function == "worker":
        body = ConsolidateJob(user_id=USER, project_id=project).model_dump_json(by_alias=True)
        message: Any = {
            "MessageId": "bench-cold-start",
            "ReceiptHandle": "bench-cold-start",
            "Body": body,
            "MD5OfBody": hashlib.md5(body.encode()).hexdigest(),  # noqa: S324 (SQS's checksum)
        }
        return FIRST_JOBS[function], sqs_event([message], "arn:aws:sqs:us-east-1:0:jobs")
    method, path, body_sent = FIRST_REQUESTS[function]
    path = path.format(project=project)
    found = runtime.match_route(method, path)
    assert found, f"no route for {method} {path}"
    return found[0].function, runtime.http_event(method, path, body=body_sent, sub=USER)


def main() -> int:
    rows = cold_starts(sys.argv[1:] or None)
    boto = rows[0][1]
    print("Cold start per function, CPU seconds (ratio to `import boto3` alone)")
    print("| function | import + first request | import alone |")
    print("|---|---|---|")
    print(f"| boto3 alone | {boto:.3f} (1.00) | |")
    for function, cold, imported in rows[1:]:
        print(
            f"| {function} | {cold:.3f} ({cold / boto:.2f}) "
            f"| {imported:.3f} ({imported / boto:.2f}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
