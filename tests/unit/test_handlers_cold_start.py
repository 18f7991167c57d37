"""A handler module makes no AWS client when it is imported: clients are made on first
use, so a cold start pays only for code, and tests can point clients at moto first."""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(path.parent.name for path in (ROOT / "functions").glob("*/app.py"))

# Run in a fresh interpreter: botocore's client creation fails loudly, then the handler is
# imported as Lambda would import it, and no boto3 session may have been made either.
PROBE = """
import sys
import botocore.session

def refused(self, *args, **kwargs):
    raise AssertionError(f"AWS client made at import: {args[:1]}")

botocore.session.Session.create_client = refused
sys.path.insert(0, sys.argv[1])
import app  # noqa: F401
import boto3
assert boto3.DEFAULT_SESSION is None, "a boto3 session was made at import"
"""


@pytest.mark.parametrize("handler", HANDLERS)
def test_importing_a_handler_makes_no_aws_client(handler: str) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "layers" / "recall"), str(ROOT)]),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": f"{handler}-function",
    }
    run = subprocess.run(  # noqa: S603 (our own interpreter and handlers, fixed arguments)
        [sys.executable, "-c", PROBE, str(ROOT / "functions" / handler)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
