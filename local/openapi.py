"""Writes the API's one OpenAPI document from every HTTP function's routes
(``python -m local.openapi``). The projects function serves the file at /openapi.json;
a test fails when it falls behind the code."""

from __future__ import annotations

import json
from pathlib import Path
import sys
from typing import Any

from local import runtime, template

DOCUMENT = template.ROOT / "layers" / "recall" / "recall" / "api" / "openapi.json"


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
        "components": {
            "schemas": {},
            "securitySchemes": {"jwt": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
        },
        "security": [{"jwt": []}],
    }
    for function in sorted({route.function for route in template.routes()}):
        app = runtime.handler_module(function).app
        schema = json.loads(app.get_openapi_json_schema(title="Recall", version="1"))
        for path, operations in schema.get("paths", {}).items():
            merged["paths"].setdefault(path, {}).update(operations)
        merged["components"]["schemas"].update(schema.get("components", {}).get("schemas", {}))
    merged["paths"] = dict(sorted(merged["paths"].items()))
    merged["components"]["schemas"] = dict(sorted(merged["components"]["schemas"].items()))
    return merged


def rendered() -> str:
    return json.dumps(document(), indent=2, sort_keys=False) + "\n"


def main(target: Path = DOCUMENT) -> int:
    target.write_text(rendered())
    print(f"wrote {target.relative_to(template.ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
