"""``python -m local.job JOB`` (``make job JOB=…``): one background job, once.

``JOB`` is a maintenance schedule's job (``consolidate``, ``prune-sessions``,
``expire-memories``: the ``job`` of each ``ScheduleV2`` input in template.yaml) or
``drain`` (work the memory jobs queue until it is empty).

With ``make dev`` running on ``PORT`` (3000 by default), the job runs there, on its data:
this sends ``POST /_local/jobs/<JOB>``, the server's local-only job route, with a local
token as every ``/_local/`` route asks (``local/tokens.py``). With nothing
listening there, it runs like ``make invoke``: in-process over a fresh embedded store seeded
with the demo project, which is gone when it ends. Either way the job's report is printed
as JSON on stdout and where it ran on stderr."""

from __future__ import annotations

import argparse
from contextlib import redirect_stdout
import json
import os
import sys
from typing import Any
import urllib.error
import urllib.request
import warnings

from local import embedded
from local.background import job_names, run_job
from local.gateway import LOCAL_JOBS
from local.seed import seed_demo
from local.server import DEFAULT_PORT, HOST
from local.tokens import demo_token

TIMEOUT_SECONDS = 120  # a drain gives up after 60 s; the server answers after that
JOB_USER = "make-job"  # who the token names: any local token will do


class NoServer(Exception):
    """Nothing listens on the port."""


def on_server(base_url: str, job: str) -> tuple[int, Any]:
    """``(status, report)`` from the running server's job route."""
    request = urllib.request.Request(  # noqa: S310 (always http://127.0.0.1)
        f"{base_url}{LOCAL_JOBS}{job}",
        data=b"",
        method="POST",
        headers={"Authorization": f"Bearer {demo_token(JOB_USER)}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        payload = error.read()
        try:
            return error.code, json.loads(payload)
        except ValueError:
            return error.code, payload.decode(errors="replace")
    except urllib.error.URLError as error:
        if isinstance(error.reason, ConnectionRefusedError):
            raise NoServer from error
        raise


def standalone(job: str) -> dict[str, Any]:
    """The job over a fresh embedded store with the demo data, logs on stderr."""
    with embedded.running() as store, redirect_stdout(sys.stderr):
        seed_demo()
        return run_job(job, store)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local.job",
        description="Run one background job once, on a running `make dev` if there is one.",
    )
    parser.add_argument("job", help=f"one of: {', '.join(job_names())}")
    args = parser.parse_args(argv)
    if args.job not in job_names():
        print(f"error: no job {args.job!r}; jobs: {', '.join(job_names())}", file=sys.stderr)
        return 2
    port = os.environ.get("PORT", str(DEFAULT_PORT))
    base_url = f"http://{HOST}:{port}"
    try:
        status, report = on_server(base_url, args.job)
    except NoServer:
        print(
            f"no server on {base_url}: running {args.job} on a fresh embedded store seeded "
            "with the demo project (start `make dev` to run it on your data)",
            file=sys.stderr,
        )
        warnings.filterwarnings("ignore", message="No application metrics")
        print(json.dumps(standalone(args.job), indent=2, default=str))
        return 0
    if status != 200 or not isinstance(report, dict):
        print(
            f"error: {base_url}{LOCAL_JOBS}{args.job} answered {status}: {report} "
            "(is it `make dev` listening there?)",
            file=sys.stderr,
        )
        return 1
    print(f"ran {args.job} on the running server at {base_url}", file=sys.stderr)
    print(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
