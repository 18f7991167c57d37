"""A handler's import loads only code its requests can run: every cold start pays for what
the import loads, used or not (``bench/cold_start.py`` measures import and first request
together). Checked on the modules a fresh interpreter holds after the import."""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(path.parent.name for path in (ROOT / "functions").glob("*/app.py"))

# Powertools' models of the OpenAPI document: only `python -m local.openapi` writes it.
DOCUMENT_MODELS = "aws_lambda_powertools.event_handler.openapi.models"
# Settings read their environment themselves; pydantic-settings is not in the layer (the
# dev environment still has it, through the contract test's tools).
SETTINGS_LIBRARY = "pydantic_settings"


def fresh(code: str, answer: str) -> Any:
    """``answer``, a JSON-able expression, in a fresh interpreter once ``code`` has run."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "layers" / "recall"), str(ROOT)]),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": "imports-function",
    }
    probe = f"{code}\nimport json, sys\nprint(json.dumps({answer}))"
    run = subprocess.run(  # noqa: S603 (our own interpreter and code, fixed arguments)
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.splitlines()[-1])


def modules_after(code: str) -> set[str]:
    return set(fresh(code, "sorted(sys.modules)"))


def importing(handler: str) -> str:
    return f"import sys\nsys.path.insert(0, {str(ROOT / 'functions' / handler)!r})\nimport app"


def imported_by(handler: str) -> set[str]:
    return modules_after(importing(handler))


@pytest.mark.parametrize("handler", HANDLERS)
def test_no_handler_imports_the_openapi_document_models_or_a_settings_library(
    handler: str,
) -> None:
    imported = imported_by(handler)
    assert DOCUMENT_MODELS not in imported
    assert SETTINGS_LIBRARY not in imported


def test_wiring_imports_a_store_only_when_it_builds_one() -> None:
    stores = {name for name in modules_after("import recall.wiring") if "recall.store." in name}
    assert stores == set()


def test_the_websocket_route_handler_loads_no_turn_code() -> None:
    """It hands a valid frame to the streaming function, which runs the turn."""
    loaded = imported_by("ws_chat")
    assert {"recall.services.chat", "recall.services.turn_context"}.isdisjoint(loaded)


@pytest.mark.parametrize("handler", ["ws_chat", "ws_stream"])
def test_the_websocket_functions_load_no_http_resolver(handler: str) -> None:
    """Frames are answered with ``recall.api.errors``: Powertools' event handler (its
    resolvers, their OpenAPI parameters) is for the HTTP functions."""
    loaded = imported_by(handler)
    assert "recall.api.http" not in loaded
    assert not any(name.startswith("aws_lambda_powertools.event_handler") for name in loaded)


def test_importing_the_projects_function_loads_no_chat_or_import_code() -> None:
    """Only erasing a project reaches the imports' and exports' stores."""
    loaded = imported_by("projects")
    assert {"recall.api.chat", "recall.store.imports", "recall.domain.exports"}.isdisjoint(loaded)
