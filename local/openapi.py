"""Writes the API's one OpenAPI document from every HTTP function's routes
(``python -m local.openapi``). The projects function serves the file at /openapi.json;
a test fails when it falls behind the code."""

from __future__ import annotations

import json
from pathlib import Path
import sys
from typing import Any

from local import runtime, template
from recall.api import contract

DOCUMENT = template.ROOT / "layers" / "recall" / "recall" / "api" / "openapi.json"
# Powertools adds a 422 of this shape to every validated route; the API never answers it
# (recall.api turns request validation errors into its own ErrorBody), so it is dropped.
POWERTOOLS_422 = "#/components/schemas/HTTPValidationError"


def _as_answered(responses: dict[str, Any]) -> dict[str, Any]:
    """A route's responses in status order, without Powertools' own 422."""
    return {
        status: response
        for status, response in sorted(responses.items())
        if POWERTOOLS_422 not in json.dumps(response)
    }


def _referenced(document: dict[str, Any]) -> dict[str, Any]:
    """Only the schemas the paths reach, directly or through other schemas."""
    schemas = document["components"]["schemas"]
    reached: set[str] = set()
    pending = [document["paths"]]
    while pending:
        text = json.dumps(pending.pop())
        for name in schemas:
            if name not in reached and f'"#/components/schemas/{name}"' in text:
                reached.add(name)
                pending.append(schemas[name])
    return {name: schema for name, schema in sorted(schemas.items()) if name in reached}


def document() -> dict[str, Any]:
    merged: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "Recall",
            "version": "1",
            "description": (
                "Saved conversations, a working context window and durable memory for AI chat "
                "products, per user and per project. Authenticate with a JWT bearer token."
            ),
        },
        "paths": {},
        "components": {"schemas": {}, "securitySchemes": {}},
    }
    for function in sorted({route.function for route in template.routes()}):
        app = runtime.handler_module(function).app
        schema = json.loads(
            app.get_openapi_json_schema(
                title="Recall", version="1", security_schemes=contract.security_schemes()
            )
        )
        for path, operations in schema.get("paths", {}).items():
            merged["paths"].setdefault(path, {}).update(operations)
        components = schema.get("components", {})
        merged["components"]["schemas"].update(components.get("schemas", {}))
        merged["components"]["securitySchemes"].update(components.get("securitySchemes", {}))
    for path, operations in merged["paths"].items():
        for method, operation in operations.items():
            operation["responses"] = _as_answered(operation["responses"])
            headers = contract.REQUEST_HEADERS.get(f"{method.upper()} {path}", [])
            operation.setdefault("parameters", []).extend(headers)
    merged["paths"] = dict(sorted(merged["paths"].items()))
    merged["components"]["schemas"] = _referenced(merged)
    return merged


def rendered() -> str:
    return json.dumps(document(), indent=2, sort_keys=False) + "\n"


def main(target: Path = DOCUMENT) -> int:
    target.write_text(rendered())
    print(f"wrote {target.relative_to(template.ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
