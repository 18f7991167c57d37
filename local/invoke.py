"""``python -m local.invoke FUNCTION EVENT_FILE``: what ``sam local invoke FUNCTION -e
EVENT_FILE`` does, without Docker. The function runs in-process over a fresh embedded
DynamoDB, seeded with the demo project and thread that the sample events name; the
response is printed as JSON on stdout and the logs go to stderr, so the output can be
piped."""

from __future__ import annotations

import argparse
from contextlib import redirect_stdout
import json
from pathlib import Path
import sys
from typing import Any
import warnings

from local import embedded, runtime, template
from local.seed import seed_demo


class UsageError(Exception):
    """A mistake in the command line, reported in one line with a non-zero exit."""


def read_event(source: str) -> dict[str, Any]:
    """The event from a file, or from stdin when ``source`` is ``-``."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read event file {source}: {exc.strerror}") from exc
    try:
        event = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"event file {source} is not valid JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise UsageError(f"event file {source} must hold a JSON object")
    return event


def checked_function(function: str) -> str:
    """The logical id, if the template declares it and its code is there."""
    code_dirs = template.code_dirs()
    if function not in code_dirs:
        known = ", ".join(sorted(code_dirs))
        raise UsageError(f"no function {function} in template.yaml; functions: {known}")
    if not (code_dirs[function] / "app.py").is_file():
        raise UsageError(f"{function} has no code yet: {code_dirs[function] / 'app.py'} missing")
    return function


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local.invoke",
        description="Invoke one function of template.yaml in-process with an event file.",
    )
    parser.add_argument("function", help="logical id in template.yaml, e.g. ProjectsFunction")
    parser.add_argument("event", help="event JSON file (events/*.json), - for stdin")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message="No application metrics")
    try:
        function = checked_function(args.function)
        event = read_event(args.event)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with embedded.running(), redirect_stdout(sys.stderr):
        seed_demo()
        response = runtime.invoke(function, event)
    print(json.dumps(response, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
