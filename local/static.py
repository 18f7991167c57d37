"""The web console's files (``web/``) served at ``/`` by ``make dev``, beside the API: only
GET and HEAD, only files under ``web/`` with a known type, so a path can never reach the
rest of the checkout. API routes are matched first; this answers only what they do not."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from local import template

WEB = template.ROOT / "web"
INDEX = "index.html"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}
# The console's pages load only their own files; they may call any API (a deployed one
# is configured in web/config.js) and open its WebSocket.
SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self' http: https: ws: wss:; frame-ancestors 'none'; base-uri 'none'"
    ),
}


@dataclass(frozen=True)
class StaticFile:
    """One of the console's files, as it goes on the wire."""

    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def console_file(method: str, path: str, root: Path = WEB) -> StaticFile | None:
    """The file under ``root`` that ``path`` names (``/`` is ``index.html``), or None when
    the method is not GET or HEAD, the path leaves ``root`` or hides a dot file, or no
    such file of a known type exists: the caller answers its usual 404 then."""
    if method.upper() not in {"GET", "HEAD"}:
        return None
    decoded = unquote(path.partition("?")[0])
    if "\\" in decoded or "\x00" in decoded:
        return None
    parts = PurePosixPath(decoded).parts[1:]
    if any(part.startswith(".") for part in parts):  # dot files, and . and ..
        return None
    relative = PurePosixPath(*parts, INDEX) if decoded.endswith("/") else PurePosixPath(*parts)
    base = root.resolve()
    target = (base / relative).resolve()
    content_type = CONTENT_TYPES.get(target.suffix)
    if content_type is None or not target.is_relative_to(base):
        return None
    try:
        if not target.is_file():
            return None
        body = target.read_bytes()
    except OSError:  # a name the file system cannot hold (over 255 bytes): no such file
        return None
    return StaticFile(
        body, {"content-type": content_type, "cache-control": "no-cache", **SECURITY_HEADERS}
    )
