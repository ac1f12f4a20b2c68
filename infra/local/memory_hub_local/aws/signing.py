"""Who may talk to the emulated AWS endpoint, checked as AWS checks it.

Every request must come for a loopback ``Host`` (127.0.0.0/8, ``[::1]``) or ``localhost`` — a web
page that rebinds its own name to 127.0.0.1 sends its own name and is refused (403) — and be signed
with Signature Version 4 by a known access key: the signature is computed again, by botocore's
signer, from the request as received and the key's secret, and must be the one sent.

Two ways of signing, as on AWS:

- in the ``Authorization`` header: the ``X-Amz-Date`` must be within 15 minutes of now; for S3 the
  ``x-amz-content-sha256`` header is required and, when it is a digest, must be the body's.
- in the query string (a presigned URL: ``X-Amz-Algorithm``, ``X-Amz-Credential``, ``X-Amz-Date``,
  ``X-Amz-Expires`` up to a week, ``X-Amz-SignedHeaders``, ``X-Amz-Signature``): valid from its date
  until date + expires; the payload is not signed (``UNSIGNED-PAYLOAD``).

Temporary credentials (a function's) must come with their session token, long-term ones (the
operator's) without one. Signature Version 2 is refused. What each failure answers is what the
service answers on AWS: S3 its XML errors (``AccessDenied`` for an anonymous request,
``InvalidAccessKeyId``, ``SignatureDoesNotMatch``, ``RequestTimeTooSkewed``, ``AccessDenied``
"Request has expired"), the JSON protocols (DynamoDB, Secrets Manager) a 400 with
``MissingAuthenticationTokenException``, ``UnrecognizedClientException``,
``InvalidSignatureException`` or ``IncompleteSignatureException``, REST JSON services the same codes
with 403."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials as BotocoreCredentials

from ..identity import Principal
from . import faithful
from .shapes import Refusal

SKEW_S = 15 * 60
MAX_EXPIRES_S = 7 * 24 * 3600
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_TIMESTAMP = "%Y%m%dT%H%M%SZ"
_QUERY_PARAMETERS = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
)
# the name a service is signed for, by the name the endpoint knows it by
SIGNING_NAMES = {"bedrock-runtime": "bedrock"}

_MISMATCH = "The request signature we calculated does not match the signature you provided."
_WRONG_REGION = "Credential should be scoped to a valid region, not '{region}'. "

# kind of failure -> (status, code, message) per protocol; a message of None is the failure's own.
_S3 = {
    "host": (403, "AccessDenied", None),
    "missing": (403, "AccessDenied", "Access Denied"),
    "unknown_key": (403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."),
    "signature": (403, "SignatureDoesNotMatch", _MISMATCH + " Check your key and signing method."),
    "skewed": (
        403,
        "RequestTimeTooSkewed",
        "The difference between the request time and the current time is too large.",
    ),
    "expired": (403, "AccessDenied", "Request has expired"),
    "not_yet": (403, "AccessDenied", "Request is not valid yet"),
    "token": (400, "InvalidToken", "The provided token is malformed or otherwise invalid."),
    "content_sha256": (
        400,
        "XAmzContentSHA256Mismatch",
        "The provided 'x-amz-content-sha256' header does not match what was computed.",
    ),
    "required_header": (400, "InvalidRequest", None),
    "header_malformed": (400, "AuthorizationHeaderMalformed", None),
    "query_malformed": (400, "AuthorizationQueryParametersError", None),
    "header_region": (
        400,
        "AuthorizationHeaderMalformed",
        "The authorization header is malformed; the region '{region}' is wrong; expecting '{expected}'",
    ),
    "query_region": (
        400,
        "AuthorizationQueryParametersError",
        "Error parsing the X-Amz-Credential parameter; the region '{region}' is wrong; expecting '{expected}'",
    ),
    "no_date": (403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"),
    "v2": (
        400,
        "InvalidRequest",
        "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.",
    ),
}
_JSON = {
    "host": (403, "AccessDeniedException", None),
    "missing": (400, "MissingAuthenticationTokenException", "Request is missing Authentication Token"),
    "unknown_key": (400, "UnrecognizedClientException", "The security token included in the request is invalid."),
    "token": (400, "UnrecognizedClientException", "The security token included in the request is invalid."),
    "signature": (
        400,
        "InvalidSignatureException",
        _MISMATCH
        + " Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
    ),
    "skewed": (400, "InvalidSignatureException", None),
    "expired": (400, "InvalidSignatureException", None),
    "not_yet": (400, "InvalidSignatureException", None),
    "content_sha256": (400, "InvalidSignatureException", _MISMATCH),
    "required_header": (400, "IncompleteSignatureException", None),
    "header_malformed": (400, "IncompleteSignatureException", None),
    "query_malformed": (400, "IncompleteSignatureException", None),
    "header_region": (400, "InvalidSignatureException", _WRONG_REGION),
    "query_region": (400, "InvalidSignatureException", _WRONG_REGION),
    "no_date": (400, "IncompleteSignatureException", None),
    "v2": (400, "IncompleteSignatureException", "Signature Version 2 is not supported."),
}


class Rejected(Exception):
    """Why a request is refused: a kind of the tables above and the failure's own words (or, for a
    credential scoped to another region, that region and the expected one, which each protocol words
    its own way)."""

    def __init__(self, kind: str, message: str = "", expected: str = "") -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.message, self.expected = kind, message, expected


@dataclass(frozen=True)
class Signed:
    """A request whose signature holds: by whom, and for which service it was signed."""

    principal: Principal
    service: str


# ---------------------------------------------------------------- the Host


def loopback_host(host: str | None) -> bool:
    """``localhost`` or a loopback address (with any port)."""
    if not host:
        return False
    host = host.strip().lower()
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return False
    else:
        name, colon, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
        if colon and not port.isdigit():
            return False
        name = name or host
    if name in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


# ---------------------------------------------------------------- the answer AWS gives


# What an unsigned request names when it is for S3 Vectors (an operation's name, in CamelCase: a
# bucket's name is lower case) or the Bedrock runtime (a model's operation: S3 takes no POST to an
# object without a query).
_REST_JSON_PATH = re.compile(
    r"^/(?:[A-Z][A-Za-z]+|model/[^/]+/(?:invoke|invoke-with-response-stream|converse|converse-stream|count-tokens))$"
)


def protocol(headers: dict[str, str], query: str, method: str = "", path: str = "") -> str:
    """How the service a request is for answers errors: ``xml`` (S3), ``json`` (X-Amz-Target
    protocols: DynamoDB, Secrets Manager) or ``rest-json`` (the others) — by the service its
    credential is scoped to, else (unsigned) by what its path names."""
    if headers.get("x-amz-target"):
        return "json"
    scope = _credential_of(headers, query)
    if scope.count("/") >= 4:
        return "xml" if scope.split("/")[3] == "s3" else "rest-json"
    return "rest-json" if method == "POST" and not query and _REST_JSON_PATH.match(path) else "xml"


def refusal(rejected: Rejected, headers: dict[str, str], query: str, method: str = "", path: str = "") -> Refusal:
    kind = protocol(headers, query, method, path)
    table = _S3 if kind == "xml" else _JSON
    status, code, message = table[rejected.kind]
    text = _words(rejected, message)
    if kind == "xml":
        if rejected.expected:  # S3 names the bucket's region: an SDK that reads it asks again there
            return faithful.s3_error(code, text, status, Region=rejected.expected)
        return faithful.s3_error(code, text, status)
    if kind == "rest-json":
        status = 403 if status == 400 else status
        body = json.dumps({"message": text}).encode()
        return Refusal(status, body, "application/json", {"x-amzn-ErrorType": code}, code)
    target = headers.get("x-amz-target", "")
    content_type = "application/x-amz-json-1.0" if target.startswith("DynamoDB_") else "application/x-amz-json-1.1"
    body = json.dumps({"__type": f"com.amazon.coral.service#{code}", "message": text}).encode()
    return Refusal(status, body, content_type, {"x-amzn-ErrorType": code}, code)


def _words(rejected: Rejected, message: str | None) -> str:
    if message is None:
        return rejected.message
    if rejected.expected:
        return message.format(region=rejected.message, expected=rejected.expected)
    return message


OPERATOR_ONLY = (
    "the control routes take only requests signed (Signature Version 4) with the operator's credentials "
    "that make run prints"
)


def control_refusal(rejected: Rejected) -> Refusal:
    """What a control route (``/_local/…`` on the AWS port) answers a request the operator did not
    sign: 403 in the REST JSON services' words (``x-amzn-ErrorType``, ``{"message"}``), the code
    the signature's failure has there; signed by a function: AccessDeniedException."""
    if rejected.kind == "operator_only":
        code, text = "AccessDeniedException", rejected.message or OPERATOR_ONLY
    else:
        _, code, message = _JSON[rejected.kind]
        text = _words(rejected, message)
        if rejected.kind == "missing":
            text += f": {OPERATOR_ONLY}"
    body = json.dumps({"message": text}).encode()
    return Refusal(403, body, "application/json", {"x-amzn-ErrorType": code}, code)


def control_check(
    verifier: Verifier, method: str, raw_path: str, headers: dict[str, str], body: bytes
) -> Refusal | None:
    """Why a control request may not run (None: the operator signed it). The control routes (a
    snapshot, the call log, the test hooks) take only requests signed with the operator's
    credentials, verified as every other request of the port."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        signed = verifier.verify(method, raw_path, lowered, body)
    except Rejected as rejected:
        return control_refusal(rejected)
    if signed.principal.function is not None:
        return control_refusal(Rejected("operator_only"))
    return None


def _credential_of(headers: dict[str, str], query: str) -> str:
    authorization = headers.get("authorization", "")
    start = authorization.find("Credential=")
    if start >= 0:
        return authorization[start + len("Credential=") :].split(",", 1)[0].strip()
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if name == "X-Amz-Credential":
            return unquote(value)
    return ""


# ---------------------------------------------------------------- the signature


class _Signer(SigV4Auth):  # type: ignore[misc]  # botocore has no type hints
    """botocore's SigV4 signer, fed what the request carried: its payload hash, and (for S3) its
    path as S3 canonicalizes it (encoded once, not normalized)."""

    def __init__(self, principal: Principal, service: str, region: str, payload_hash: str, s3: bool) -> None:
        super().__init__(BotocoreCredentials(principal.access_key, principal.secret, principal.token), service, region)
        self._payload_hash, self._s3 = payload_hash, s3

    def headers_to_sign(self, request: Any) -> HTTPHeaders:
        """Exactly the headers the request names as signed (AWS signs what the client listed)."""
        found = HTTPHeaders()
        for name, value in request.headers.items():
            found[name.lower()] = value
        return found

    def payload(self, request: Any) -> str:
        return self._payload_hash

    def _normalize_url_path(self, path: str) -> str:
        return path if self._s3 else str(super()._normalize_url_path(path))


def _pairs(query: str) -> list[tuple[str, str]]:
    pairs = []
    for pair in query.split("&") if query else []:
        name, _, value = pair.partition("=")
        pairs.append((unquote(name), unquote(value)))
    return pairs


_ISO_BASIC = re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})Z")


def _timestamp(value: str) -> float | None:
    """Seconds since the epoch of an ISO 8601 basic timestamp (``20260101T080000Z``), or None."""
    match = _ISO_BASIC.fullmatch(value)
    if match is None:
        return None
    try:
        year, month, day, hour, minute, second = map(int, match.groups())
        return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime(_TIMESTAMP)


def _authorization_parts(authorization: str) -> dict[str, str]:
    """``Credential``, ``SignedHeaders`` and ``Signature`` of a SigV4 ``Authorization`` header."""
    algorithm, _, rest = authorization.strip().partition(" ")
    if algorithm == "AWS":
        raise Rejected("v2")
    if algorithm != "AWS4-HMAC-SHA256":
        raise Rejected("header_malformed", "The authorization header is malformed; unsupported algorithm.")
    parts: dict[str, str] = {}
    for part in rest.split(","):
        name, equals, value = part.strip().partition("=")
        if equals:
            parts[name] = value
    if not {"Credential", "SignedHeaders", "Signature"} <= parts.keys():
        raise Rejected(
            "header_malformed",
            "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.",
        )
    return parts


def _header_date(date: str, credential: str, now: float) -> str:
    """The ``X-Amz-Date`` a header signature was made at: the credential's day, within 15 minutes of now."""
    signed_at = _timestamp(date)
    if signed_at is None:
        raise Rejected(
            "no_date", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
        )
    if credential.split("/")[1] != date[:8]:
        raise Rejected("header_malformed", "Invalid credential date. Date is not the same as X-Amz-Date.")
    if signed_at < now - SKEW_S:
        raise Rejected(
            "skewed",
            f"Signature expired: {date} is now earlier than {_stamp(now - SKEW_S)} ({_stamp(now)} - 15 min.)",
        )
    if signed_at > now + SKEW_S:
        raise Rejected(
            "skewed",
            f"Signature not yet current: {date} is still later than {_stamp(now + SKEW_S)} ({_stamp(now)} + 15 min.)",
        )
    return date


def _payload_hash(headers: dict[str, str], body: bytes, s3: bool) -> str:
    """The payload hash the signature covers. S3 requires ``x-amz-content-sha256`` (the body's
    SHA-256 or ``UNSIGNED-PAYLOAD``); other services hash the body, and a header, if sent, must match."""
    digest = hashlib.sha256(body).hexdigest()
    declared = headers.get("x-amz-content-sha256")
    if not s3:
        if declared is not None and declared != digest:
            raise Rejected("content_sha256")
        return digest
    if declared is None:
        raise Rejected("required_header", "Missing required header for this request: x-amz-content-sha256")
    if (len(declared) == 64 and declared != digest) or (len(declared) != 64 and declared != UNSIGNED_PAYLOAD):
        raise Rejected("content_sha256")
    return declared


class Verifier:
    def __init__(self, principals: dict[str, Principal], region: str) -> None:
        self.principals, self.region = principals, region

    def verify(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes, now: float | None = None
    ) -> Signed:
        """The request's signer, or ``Rejected`` (``headers``: names in lower case)."""
        now = time.time() if now is None else now
        url = urlsplit(raw_path)
        pairs = _pairs(url.query)
        names = {name for name, _ in pairs}
        if "authorization" in headers:
            if "X-Amz-Signature" in names or "X-Amz-Credential" in names:
                raise Rejected("header_malformed", "Only one auth mechanism allowed")
            return self._header_signed(method, url.path, pairs, headers, body, now)
        if names & set(_QUERY_PARAMETERS):
            return self._query_signed(method, url.path, pairs, headers, now)
        if "AWSAccessKeyId" in names or "Signature" in names:
            raise Rejected("v2")
        raise Rejected("missing")

    def _principal(self, credential: list[str], token: str | None, malformed: str) -> tuple[Principal, str]:
        if len(credential) != 5 or credential[4] != "aws4_request":
            raise Rejected(
                malformed,
                "Error parsing the X-Amz-Credential parameter; the Credential is mal-formed; "
                'expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".',
            )
        key, _, region, service, _ = credential
        principal = self.principals.get(key)
        if principal is None:
            raise Rejected("unknown_key")
        if region != self.region:
            where = "header" if malformed == "header_malformed" else "query"
            raise Rejected(f"{where}_region", region, expected=self.region)
        if principal.token is not None and not hmac.compare_digest(token or "", principal.token):
            raise Rejected("token")
        if principal.token is None and token:
            raise Rejected("token")
        return principal, service

    def _header_signed(
        self, method: str, path: str, pairs: list[tuple[str, str]], headers: dict[str, str], body: bytes, now: float
    ) -> Signed:
        parts = _authorization_parts(headers["authorization"])
        s3 = "x-amz-target" not in headers and parts["Credential"].split("/")[3:4] == ["s3"]
        principal, service = self._principal(
            parts["Credential"].split("/"), headers.get("x-amz-security-token"), "header_malformed"
        )
        date = _header_date(headers.get("x-amz-date", ""), parts["Credential"], now)
        payload_hash = _payload_hash(headers, body, s3)
        signed = parts["SignedHeaders"].split(";")
        if "host" not in signed:
            raise Rejected("signature")
        self._check(
            method, path, pairs, headers, signed, principal, service, date, payload_hash, s3, parts["Signature"]
        )
        return Signed(principal, service)

    def _query_signed(
        self, method: str, path: str, pairs: list[tuple[str, str]], headers: dict[str, str], now: float
    ) -> Signed:
        query = dict(pairs)
        if not set(_QUERY_PARAMETERS) <= query.keys():
            raise Rejected(
                "query_malformed",
                "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, "
                "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.",
            )
        if query["X-Amz-Algorithm"] != "AWS4-HMAC-SHA256":
            raise Rejected("query_malformed", 'X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
        expires = query["X-Amz-Expires"]
        if not expires.isdigit() or int(expires) > MAX_EXPIRES_S:
            raise Rejected(
                "query_malformed", f"X-Amz-Expires must be less than a week (in seconds) that is {MAX_EXPIRES_S}"
            )
        credential = query["X-Amz-Credential"].split("/")
        principal, service = self._principal(credential, query.get("X-Amz-Security-Token"), "query_malformed")
        date = query["X-Amz-Date"]
        signed_at = _timestamp(date)
        if signed_at is None:
            raise Rejected("query_malformed", "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
        if credential[1] != date[:8]:
            raise Rejected("query_malformed", "Invalid credential date. Date is not the same as X-Amz-Date.")
        if now > signed_at + int(expires):
            raise Rejected("expired")
        if signed_at > now + SKEW_S:
            raise Rejected("not_yet")
        signed = query["X-Amz-SignedHeaders"].split(";")
        if "host" not in signed:
            raise Rejected("signature")
        unsigned_pairs = [(name, value) for name, value in pairs if name != "X-Amz-Signature"]
        s3 = service == "s3"
        payload_hash = (
            headers.get("x-amz-content-sha256", UNSIGNED_PAYLOAD)
            if "x-amz-content-sha256" in signed
            else UNSIGNED_PAYLOAD
        )
        self._check(
            method,
            path,
            unsigned_pairs,
            headers,
            signed,
            principal,
            service,
            date,
            payload_hash,
            s3,
            query["X-Amz-Signature"],
        )
        return Signed(principal, service)

    def _check(
        self,
        method: str,
        path: str,
        pairs: list[tuple[str, str]],
        headers: dict[str, str],
        signed: list[str],
        principal: Principal,
        service: str,
        date: str,
        payload_hash: str,
        s3: bool,
        signature: str,
    ) -> None:
        if any(name not in headers for name in signed):
            raise Rejected("signature")
        if s3:
            path = quote(unquote(path), safe="/~")
        request = AWSRequest(
            method=method,
            url=f"http://{headers['host']}{path}",
            headers={name: headers[name] for name in signed},
            params=pairs,
        )
        request.context["timestamp"] = date
        signer = _Signer(principal, service, self.region, payload_hash, s3)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if not hmac.compare_digest(expected, signature):
            raise Rejected("signature")
