"""make dev serves the console's files beside the API, and answers CORS only for the
configured origins (CORS_ALLOWED_ORIGINS, like the template's CorsAllowedOrigins)."""

from __future__ import annotations

import http.client
from pathlib import Path
from urllib.parse import urlsplit

from local import static, template
from local.tokens import demo_token
from tests.e2e.conftest import DevServer
from tests.web.conftest import ALLOWED_ORIGIN


def fetch(
    console: DevServer, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    address = urlsplit(console.url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)  # sent as given
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return (
            response.status,
            {name.lower(): value for name, value in response.getheaders()},
            response.read(),
        )
    finally:
        connection.close()


def test_the_console_page_is_served_at_the_root(console: DevServer) -> None:
    # When
    status, headers, body = fetch(console, "GET", "/")
    # Then
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert body == (template.ROOT / "web" / "index.html").read_bytes()
    assert "script-src 'self'" in headers["content-security-policy"]


def test_scripts_and_styles_carry_their_content_types(console: DevServer) -> None:
    # When
    script = fetch(console, "GET", "/js/app.js")
    style = fetch(console, "GET", "/style.css")
    head = fetch(console, "HEAD", "/config.js")
    # Then
    assert (script[0], script[1]["content-type"]) == (200, "text/javascript; charset=utf-8")
    assert (style[0], style[1]["content-type"]) == (200, "text/css; charset=utf-8")
    assert (head[0], head[2]) == (200, b"")
    assert head[1]["content-length"] == str(len((template.ROOT / "web/config.js").read_bytes()))


def test_no_path_reaches_outside_the_console_folder(console: DevServer) -> None:
    for path in (
        "/../pyproject.toml",
        "/%2e%2e/pyproject.toml",
        "/js/%2E%2E/%2E%2E/template.yaml",
        "/js/..%2f..%2ftemplate.yaml",
        "/..%5cpyproject.toml",
        "//etc/passwd",
        "/.git/config",
        "/missing.html",
        "/js/",
    ):
        # When
        status, _, body = fetch(console, "GET", path)
        # Then
        assert (status, body) == (404, b'{"message":"Not Found"}'), path


def test_a_file_name_longer_than_the_file_system_takes_is_api_gateways_404(
    console: DevServer,
) -> None:
    # Given: names over the 255 bytes a file name may have, no route takes them
    for path in ("/" + "a" * 300 + ".js", "/js/" + "a" * 300 + ".json"):
        # When
        status, _, body = fetch(console, "GET", path)
        # Then: the answer to any file that is not there, not a dropped connection
        assert (status, body) == (404, b'{"message":"Not Found"}'), path


def test_only_get_and_head_read_the_console(console: DevServer) -> None:
    # When
    status, _, _ = fetch(console, "POST", "/index.html", {"content-length": "0"})
    # Then
    assert status == 404


def test_api_routes_keep_precedence_over_files(console: DevServer) -> None:
    # When
    status, headers, _ = fetch(console, "GET", "/projects")
    # Then: the API's own 401, not a file
    assert status == 401
    assert headers["content-type"] == "application/json"


def test_a_configured_origin_gets_its_preflight_and_reads_answers(console: DevServer) -> None:
    # Given
    token = demo_token("cors-reader")
    # When
    preflight = fetch(
        console,
        "OPTIONS",
        "/projects",
        {
            "origin": ALLOWED_ORIGIN,
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization,content-type",
        },
    )
    answer = fetch(
        console, "GET", "/projects", {"origin": ALLOWED_ORIGIN, "authorization": f"Bearer {token}"}
    )
    # Then
    assert preflight[0] == 204
    assert preflight[1]["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "POST" in preflight[1]["access-control-allow-methods"]
    assert "authorization" in preflight[1]["access-control-allow-headers"]
    assert answer[0] == 200
    assert answer[1]["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "retry-after" in answer[1]["access-control-expose-headers"]


def test_another_origin_gets_no_cors_permission(console: DevServer) -> None:
    # When
    preflight = fetch(
        console,
        "OPTIONS",
        "/projects",
        {"origin": "http://elsewhere.example", "access-control-request-method": "GET"},
    )
    answer = fetch(console, "GET", "/", {"origin": "http://elsewhere.example"})
    # Then
    assert preflight[0] == 204
    assert "access-control-allow-origin" not in preflight[1]
    assert "access-control-allow-origin" not in answer[1]


def test_the_template_turns_cors_on_only_for_the_origins_given() -> None:
    # Given
    document = template.load()
    api = template.resources("AWS::Serverless::HttpApi")["HttpApi"]["Properties"]
    # When
    cors = api["CorsConfiguration"]
    # Then: empty (the default) leaves the API without CORS answers
    assert document["Parameters"]["CorsAllowedOrigins"]["Default"] == ""
    assert document["Conditions"]["HasCorsOrigins"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "CorsAllowedOrigins"}, ""]}]
    }
    condition, configured, otherwise = cors["Fn::If"]
    assert (condition, otherwise) == ("HasCorsOrigins", {"Ref": "AWS::NoValue"})
    assert configured["AllowOrigins"] == {"Fn::Split": [",", {"Ref": "CorsAllowedOrigins"}]}
    assert set(configured["AllowHeaders"]) >= {"authorization", "content-type", "idempotency-key"}
    assert set(configured["ExposeHeaders"]) >= {"location", "retry-after"}
    assert "AllowCredentials" not in configured  # bearer tokens, never cookies


def test_a_link_out_of_the_folder_or_a_dot_file_is_never_served(tmp_path: Path) -> None:
    # Given
    root = tmp_path / "web"
    root.mkdir()
    (tmp_path / "secret.js").write_text("secret")
    (root / "outside.js").symlink_to(tmp_path / "secret.js")
    (root / ".hidden.js").write_text("hidden")
    (root / "app.js").write_text("shown")
    # When
    found = {
        path: static.console_file("GET", path, root)
        for path in ("/outside.js", "/.hidden.js", "/app.js")
    }
    # Then
    assert found["/outside.js"] is None
    assert found["/.hidden.js"] is None
    assert found["/app.js"] is not None and found["/app.js"].body == b"shown"
