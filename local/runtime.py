"""What Lambda and API Gateway do around a handler, done in-process: load a function's
``app.py`` from its ``CodeUri``, build the HTTP API (payload v2) event API Gateway would
send for a request, and pass a context object shaped like Lambda's."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import cache
import importlib.util
import json
import sys
import threading
import time
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl
import uuid

from local import template

LAYER = template.ROOT / "layers" / "recall"
if str(LAYER) not in sys.path:
    sys.path.insert(0, str(LAYER))


@dataclass
class LambdaContext:
    function_name: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = ""
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"
    deadline_ms: int = 0

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))


def new_context(function: str, timeout_seconds: int = 29) -> LambdaContext:
    return LambdaContext(
        function_name=function,
        aws_request_id=str(uuid.uuid4()),
        deadline_ms=int(time.time() * 1000) + timeout_seconds * 1000,
    )


@cache
def handler_module(function: str) -> ModuleType:
    """A function's ``app`` module, loaded once under a name of its own (every function's
    module is called ``app``)."""
    path = template.code_dirs()[function] / "app.py"
    name = f"recall_function_{function}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_instances: dict[str, threading.RLock] = {}
_instances_lock = threading.Lock()
# One for every function of the HTTP API: see ``invoke``.
_RESOLVERS = threading.RLock()


@cache
def resolver_functions() -> frozenset[str]:
    """The functions behind the HTTP API's routes: each handler is a Powertools resolver."""
    return frozenset(route.function for route in template.routes())


def invoke(function: str, event: dict[str, Any]) -> Any:
    """One invocation at a time per function, as one Lambda instance runs them. The HTTP
    API's functions also take turns with each other: Powertools keeps the current event on
    a class every resolver shares (``BaseRouter.current_event``), which Lambda never shares
    between functions but this one process does, so two of them at once would each read
    the other's caller and body."""
    if function in resolver_functions():
        instance = _RESOLVERS
    else:
        with _instances_lock:
            instance = _instances.setdefault(function, threading.RLock())
    with instance:
        context = new_context(function, template.function_timeout(function))
        return handler_module(function).lambda_handler(event, context)


def match_route(method: str, path: str) -> tuple[template.Route, dict[str, str]] | None:
    """The template route API Gateway would pick, with its path parameters."""
    for route in template.routes():
        found = route.pattern.match(path)
        if found and route.method == method.upper():
            return route, found.groupdict()
    return None


def http_event(
    method: str,
    path: str,
    *,
    body: str | bytes | dict[str, Any] | list[Any] | None = None,
    headers: dict[str, str] | None = None,
    query: str = "",
    sub: str | None = None,
) -> dict[str, Any]:
    """The event API Gateway's HTTP API sends a Lambda for this request, with the JWT
    authorizer's claims when ``sub`` is given. ``path`` is the decoded one the HTTP API
    routes on and passes on (``rawPath``, ``pathParameters``; ``local.gateway.gateway_path``);
    ``query``, the raw query string, whose parameters it decodes."""
    found = match_route(method, path)
    route, path_parameters = found if found else (None, {})
    headers = {key.lower(): value for key, value in (headers or {}).items()}
    encoded = False
    text: str | None
    if isinstance(body, (dict, list)):
        text = json.dumps(body)
        headers.setdefault("content-type", "application/json")
    elif isinstance(body, bytes):
        try:
            text = body.decode()
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(body).decode(), True
    else:
        text = body
    if text is not None:
        headers.setdefault("content-type", "application/json")
    now = time.time()
    query_parameters: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        query_parameters[key] = (
            f"{query_parameters[key]},{value}" if key in query_parameters else value
        )
    request_context: dict[str, Any] = {
        "accountId": "000000000000",
        "apiId": "local",
        "domainName": "127.0.0.1",
        "domainPrefix": "local",
        "http": {
            "method": method.upper(),
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": "127.0.0.1",
            "userAgent": headers.get("user-agent", "local"),
        },
        "requestId": str(uuid.uuid4()),
        "routeKey": route.route_key if route else "$default",
        "stage": "$default",
        "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
        "timeEpoch": int(now * 1000),
    }
    if sub is not None:
        request_context["authorizer"] = {
            "jwt": {
                "claims": {"sub": sub, "iss": "local", "aud": "local"},
                "scopes": None,
            }
        }
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": request_context["routeKey"],
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": request_context,
        "isBase64Encoded": encoded,
    }
    if query_parameters:
        event["queryStringParameters"] = query_parameters
    if path_parameters:
        event["pathParameters"] = path_parameters
    if text is not None:
        event["body"] = text
    return event
