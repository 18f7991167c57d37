"""The WebSocket API's $connect authorizer verifies the HTTP API's JWT with PyJWT against
the issuer's JWKS, served here by a local HTTP server at ``{issuer}/.well-known/jwks.json``
(no network): signature, ``exp``, ``nbf``, ``iss`` and ``aud`` (or ``client_id``), the
token from the query string or the subprotocols."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import json
import socket
import threading
import time
from types import ModuleType
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, rsa
import jwt
import pytest

from local import runtime, template
from recall.settings import Settings
from recall.store.keys import USER_ID_MAX_BYTES

AUDIENCE = "recall-web"
CONNECT_EVENT = template.ROOT / "events" / "ws_authorizer-connect.json"
METHOD_ARN = json.loads(CONNECT_EVENT.read_text())["methodArn"]


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


KEY, OTHER_KEY = new_key(), new_key()
# An elliptic-curve key the issuer publishes too, as "e1": the HTTP API's JWT authorizer
# verifies RSA signatures only.
EC_KEY = ec.generate_private_key(ec.SECP256R1())


class Issuer:
    def __init__(self, url: str) -> None:
        self.url = url
        self.fetches = 0


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    """An identity provider publishing KEY's public half as its JWKS, and EC_KEY's."""
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
    elliptic = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(EC_KEY.public_key()))
    document = json.dumps(
        {
            "keys": [
                {**public, "kid": "k1", "use": "sig", "alg": "RS256"},
                {**elliptic, "kid": "e1", "use": "sig", "alg": "ES256"},
            ]
        }
    )
    state: dict[str, Issuer] = {}

    class Jwks(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == "/.well-known/jwks.json"
            state["issuer"].fetches += found
            self.send_response(200 if found else 404)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(document.encode() if found else b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["issuer"] = Issuer(f"http://127.0.0.1:{server.server_address[1]}")
    yield state["issuer"]
    server.shutdown()
    server.server_close()


@pytest.fixture
def authorizer(issuer: Issuer, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    module = runtime.handler_module("WsAuthorizerFunction")
    settings = Settings(jwt_issuer=issuer.url, jwt_audience=(AUDIENCE, "other-client"))
    monkeypatch.setattr(module, "get_settings", lambda: settings)
    module.signing_keys.cache_clear()
    yield module
    module.signing_keys.cache_clear()


@pytest.fixture
def silent_issuer(monkeypatch: pytest.MonkeyPatch) -> Iterator[Issuer]:
    """An issuer whose key endpoint takes the connection and never answers, and the
    authorizer pointed at it, waiting a short JWKS_FETCH_TIMEOUT_SECONDS."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        issuer = Issuer(f"http://127.0.0.1:{listening.getsockname()[1]}")
        module = runtime.handler_module("WsAuthorizerFunction")
        settings = Settings(
            jwt_issuer=issuer.url, jwt_audience=(AUDIENCE,), jwks_fetch_timeout_seconds=0.3
        )
        monkeypatch.setattr(module, "get_settings", lambda: settings)
        module.signing_keys.cache_clear()
        yield issuer
        module.signing_keys.cache_clear()


def token(issuer: Issuer, key: rsa.RSAPrivateKey = KEY, **claims: Any) -> str:
    payload = {
        "sub": "user-1",
        "iss": issuer.url,
        "aud": AUDIENCE,
        "exp": int(time.time()) + 300,
        **claims,
    }
    return jwt.encode(
        {name: value for name, value in payload.items() if value is not None},
        key,
        algorithm="RS256",
        headers={"kid": "k1"},
    )


def connect(
    module: ModuleType, query: str | None = None, protocols: str | None = None
) -> dict[str, Any]:
    """The sample event ``events/ws_authorizer-connect.json`` with the token put in."""
    event: dict[str, Any] = json.loads(CONNECT_EVENT.read_text())
    event["headers"].pop("Sec-WebSocket-Protocol")
    if query is not None:
        event["queryStringParameters"] = {"token": query}
    if protocols is not None:
        event["headers"]["Sec-WebSocket-Protocol"] = protocols
    result: dict[str, Any] = module.lambda_handler(event, None)
    return result


def refused(module: ModuleType, **where: str) -> None:
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        connect(module, **where)


def test_a_valid_token_in_the_query_string_allows_the_connect_as_its_subject(
    authorizer: ModuleType, issuer: Issuer
) -> None:
    # When
    expires = int(time.time()) + 300
    answer = connect(authorizer, query=token(issuer, exp=expires))
    # Then: API Gateway keeps the context on the connection; exp ends what it may do
    assert answer["principalId"] == "user-1"
    assert answer["context"] == {"sub": "user-1", "exp": str(expires)}
    (statement,) = answer["policyDocument"]["Statement"]
    assert statement == {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": METHOD_ARN}


def test_a_valid_token_after_bearer_in_the_subprotocols_allows_the_connect(
    authorizer: ModuleType, issuer: Issuer
) -> None:
    answer = connect(authorizer, protocols=f"bearer, {token(issuer)}")
    assert answer["principalId"] == "user-1"


def test_the_issuers_keys_are_fetched_once_per_container(
    authorizer: ModuleType, issuer: Issuer
) -> None:
    # When
    for _ in range(3):
        connect(authorizer, query=token(issuer))
    # Then
    assert issuer.fetches == 1


def test_a_cognito_access_token_names_its_audience_as_client_id(
    authorizer: ModuleType, issuer: Issuer
) -> None:
    answer = connect(authorizer, query=token(issuer, aud=None, client_id="other-client"))
    assert answer["principalId"] == "user-1"


def test_no_token_is_refused(authorizer: ModuleType) -> None:
    refused(authorizer)
    refused(authorizer, protocols="bearer")
    refused(authorizer, protocols="graphql-ws")


def test_an_expired_token_is_refused(authorizer: ModuleType, issuer: Issuer) -> None:
    refused(authorizer, query=token(issuer, exp=int(time.time()) - 60))


def test_a_token_without_exp_is_refused(authorizer: ModuleType, issuer: Issuer) -> None:
    refused(authorizer, query=token(issuer, exp=None))


def test_a_token_from_another_issuer_is_refused(authorizer: ModuleType, issuer: Issuer) -> None:
    refused(authorizer, query=token(issuer, iss="https://elsewhere.example"))


def test_a_token_for_another_audience_is_refused(authorizer: ModuleType, issuer: Issuer) -> None:
    refused(authorizer, query=token(issuer, aud="someone-else"))


def test_a_token_not_valid_before_a_time_still_to_come_is_refused(
    authorizer: ModuleType, issuer: Issuer
) -> None:
    # Given a token otherwise valid whose nbf is a minute away, and one whose nbf has passed
    now = int(time.time())
    early = token(issuer, nbf=now + 60)
    due = token(issuer, nbf=now - 60)
    # When / Then the early one is refused as an expired one is, and the other taken
    refused(authorizer, query=early)
    assert connect(authorizer, query=due)["principalId"] == "user-1"


def test_a_token_signed_by_another_key_is_refused(authorizer: ModuleType, issuer: Issuer) -> None:
    refused(authorizer, query=token(issuer, key=OTHER_KEY))


def test_a_subject_no_key_can_hold_is_refused_at_the_upgrade(
    authorizer: ModuleType, issuer: Issuer
) -> None:
    refused(authorizer, query=token(issuer, sub="auth0#bob"))
    longest = "b" * USER_ID_MAX_BYTES
    refused(authorizer, query=token(issuer, sub=longest + "b"))
    assert connect(authorizer, query=token(issuer, sub=longest))["principalId"] == longest


def test_an_unsigned_demo_token_is_refused(authorizer: ModuleType) -> None:
    from local.tokens import demo_token

    refused(authorizer, query=demo_token("user-1"))


def test_the_keys_are_read_from_the_issuers_well_known_jwks() -> None:
    module = runtime.handler_module("WsAuthorizerFunction")
    assert module.jwks_url("https://idp.example/pool/") == (
        "https://idp.example/pool/.well-known/jwks.json"
    )


def test_a_token_whose_algorithm_does_not_fit_its_key_is_refused_not_a_500(
    authorizer: ModuleType, issuer: Issuer
) -> None:
    # Given a token signed with an EC key whose header names the issuer's RSA key
    claims = {"sub": "user-1", "iss": issuer.url, "aud": AUDIENCE, "exp": int(time.time()) + 300}
    forged = jwt.encode(
        claims, ec.generate_private_key(ec.SECP256R1()), algorithm="ES256", headers={"kid": "k1"}
    )
    # When / Then the upgrade is refused as any bad token is, the check itself refusing it
    refused(authorizer, query=forged)
    with pytest.raises(jwt.InvalidAlgorithmError):
        authorizer.verified_token(forged)


def test_a_check_that_breaks_refuses_the_upgrade_rather_than_fail_it(
    authorizer: ModuleType, issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a check that raises something no one foresaw
    def broken(token: str) -> tuple[str, int]:
        raise TypeError("Expecting a PEM-formatted key.")

    monkeypatch.setattr(authorizer, "verified_token", broken)
    # When / Then API Gateway hears Unauthorized (a 401), not an error (a 500)
    refused(authorizer, query=token(issuer))


@pytest.mark.parametrize(
    "audience", [7, {"aud": AUDIENCE}, [7, None]], ids=["int", "object", "list"]
)
def test_an_audience_of_the_wrong_type_is_refused_not_a_500(
    authorizer: ModuleType, issuer: Issuer, audience: Any
) -> None:
    refused(authorizer, query=token(issuer, aud=audience))


def test_an_audience_list_naming_this_api_among_others_is_taken(
    authorizer: ModuleType, issuer: Issuer
) -> None:
    allowed = connect(authorizer, query=token(issuer, aud=["elsewhere", 7, AUDIENCE]))
    assert allowed["principalId"] == "user-1"


def test_an_issuer_that_never_answers_refuses_the_connect_within_the_fetch_timeout(
    silent_issuer: Issuer,
) -> None:
    # Given an issuer whose key endpoint hangs
    authorizer = runtime.handler_module("WsAuthorizerFunction")
    # When a connect brings a token it signed
    started = time.monotonic()
    refused(authorizer, query=token(silent_issuer))
    # Then it is refused once the fetch times out, long before the function would
    assert time.monotonic() - started < 2


def test_waiting_on_the_issuer_stays_well_inside_the_authorizers_timeout() -> None:
    # Given the authorizer's Timeout, and its wait on the issuer by default
    functions = template.resources("AWS::Serverless::Function")
    timeout = functions["WsAuthorizerFunction"]["Properties"]["Timeout"]
    wait = Settings().jwks_fetch_timeout_seconds
    # Then a kid the cached set lacks, fetched twice, takes at most half of it
    assert 2 * wait <= timeout / 2


def test_an_es256_token_signed_with_the_issuers_own_ec_key_is_refused_as_the_http_api_would(
    authorizer: ModuleType, issuer: Issuer
) -> None:
    # Given a token the issuer signed with the EC key it publishes, otherwise valid
    claims = {"sub": "user-1", "iss": issuer.url, "aud": AUDIENCE, "exp": int(time.time()) + 300}
    signed = jwt.encode(claims, EC_KEY, algorithm="ES256", headers={"kid": "e1"})
    # When / Then the upgrade is refused: the HTTP API's JWT authorizer takes RSA only
    refused(authorizer, query=signed)
