"""Requests through the local gateway routing: envelope, auth, the order of checks, isolation, fields."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from helpers import ADMIN_KEY, SERVICE_ID, make_scope

REQUEST_ID = re.compile(r"^req-[0-9a-f]{16}$")
MIB = 1_048_576


def make_key(api, role: str, team_ids: list[str]) -> tuple[str, str]:
    created = api.post("/v3/admin/keys/create", {"role": role, "team_ids": team_ids})
    assert created.status == 200, created.body
    return created.data["key_id"], created.data["api_key"]


def assert_error(answer, status: int, message: str | None = None) -> None:
    assert answer.status == status, answer.body
    assert answer.body["code"] == status
    assert REQUEST_ID.match(answer.body["request_id"])
    assert answer.headers["x-request-id"] == answer.body["request_id"]
    if message is not None:
        assert answer.message == message


def post_raw(api, path: str, raw: bytes, headers: dict[str, str] | None = None, method: str = "POST"):
    return api.raw(method, path, raw, {**api.auth_headers(), **(headers or {})})


# --- envelope ---------------------------------------------------------------------------------


def test_success_envelope_has_code_message_request_id_and_data(api, scope):
    answer = api.post("/v3/scenario/write", scope.body(path="e/a.md", content="x"))
    assert answer.status == 200
    assert set(answer.body) == {"code", "message", "request_id", "data"}
    assert answer.body["code"] == 0 and answer.body["message"] == "ok"
    assert REQUEST_ID.match(answer.body["request_id"])
    assert answer.headers["x-request-id"] == answer.body["request_id"]
    assert answer.headers["Content-Type"].startswith("application/json")


def test_error_envelope_carries_the_status_as_code(api, scope):
    answer = api.post("/v3/scenario/read", scope.body(path="no-md-suffix"))
    assert_error(answer, 400)
    assert answer.headers["Content-Type"].startswith("application/json")
    assert answer.message.startswith("path: ")


def test_request_ids_differ_per_request(api, scope):
    ids = {api.post("/v3/scenario/count", scope.body()).body["request_id"] for _ in range(5)}
    ids |= {api.post("/v3/nope", {}).body["request_id"] for _ in range(3)}
    assert len(ids) == 8 and all(REQUEST_ID.match(i) for i in ids)


# --- 401 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("service", [None, "", "other", "default2"])
def test_unknown_service_id_is_401_even_with_a_good_key(api, scope, service):
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    if service is not None:
        headers["x-tdai-service-id"] = service
    answer = api.raw("POST", "/v3/scenario/count", json.dumps(scope.body()).encode(), headers)
    assert_error(answer, 401, "x-tdai-service-id: unknown service")


def test_service_id_is_checked_before_the_key(api, scope):
    answer = api.raw(
        "POST", "/v3/scenario/count", json.dumps(scope.body()).encode(), {"Authorization": "Bearer nonsense"}
    )
    assert_error(answer, 401, "x-tdai-service-id: unknown service")


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic " + ADMIN_KEY,
        ADMIN_KEY,
        "Bearer not-a-key",
        "Bearer mhk_0123456789ab_" + "A" * 40,  # well-formed but unknown
        "Bearer " + ADMIN_KEY + "x",
    ],
)
def test_bad_keys_are_401_without_saying_why(api, scope, authorization):
    headers = {"x-tdai-service-id": SERVICE_ID}
    if authorization is not None:
        headers["Authorization"] = authorization
    answer = api.raw("POST", "/v3/scenario/count", json.dumps(scope.body()).encode(), headers)
    assert_error(answer, 401, "authorization: invalid key")


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_bearer_scheme_is_case_insensitive(api, scope, scheme):
    headers = {"x-tdai-service-id": SERVICE_ID, "Authorization": f"{scheme} {ADMIN_KEY}"}
    answer = api.raw("POST", "/v3/scenario/count", json.dumps(scope.body()).encode(), headers)
    assert answer.status == 200, answer.body
    assert answer.data["count"] == 0


def test_header_names_are_case_insensitive(api, scope):
    headers = {"X-TDAI-Service-Id": SERVICE_ID, "AUTHORIZATION": f"Bearer {ADMIN_KEY}"}
    answer = api.raw("POST", "/v3/scenario/count", json.dumps(scope.body()).encode(), headers)
    assert answer.status == 200, answer.body


def test_revoked_key_fails_on_the_very_next_request(api, scope):
    key_id, secret = make_key(api, "writer", ["*"])
    user = api.with_key(secret)
    assert user.post("/v3/scenario/count", scope.body()).status == 200
    assert api.post("/v3/admin/keys/revoke", {"key_id": key_id}).data["revoked"] is True
    assert_error(user.post("/v3/scenario/count", scope.body()), 401, "authorization: invalid key")
    # a revoked key looks exactly like an unknown one, on every route
    assert_error(user.post("/v3/nowhere", {}), 401, "authorization: invalid key")


def test_a_forged_secret_for_a_real_key_id_is_401(api, scope):
    _, secret = make_key(api, "reader", ["*"])
    forged = secret[:-4] + ("AAAA" if not secret.endswith("AAAA") else "BBBB")
    assert api.with_key(secret).post("/v3/scenario/count", scope.body()).status == 200
    assert_error(api.with_key(forged).post("/v3/scenario/count", scope.body()), 401, "authorization: invalid key")


# --- 401 → 404/405 → 403 -------------------------------------------------------------------------


def test_401_before_404_and_405(api):
    anonymous = api.with_key(None)
    assert_error(anonymous.post("/v3/no/such/route", {}), 401, "authorization: invalid key")
    assert_error(anonymous.raw("GET", "/v3/scenario/read", None, anonymous.auth_headers()), 401)
    assert_error(api.raw("POST", "/v3/no/such/route", b"{}", {}), 401, "x-tdai-service-id: unknown service")


def test_unknown_route_is_a_404_envelope(api):
    answer = api.post("/v3/no/such/route", {})
    assert_error(answer, 404)
    assert "data" not in answer.body or isinstance(answer.body["data"], dict)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "TRACE", "PROPFIND", "FOO"])
def test_other_method_on_a_known_route_is_405(api, method):
    answer = api.raw(method, "/v3/scenario/read", None, api.auth_headers())
    assert_error(answer, 405)
    assert {k.lower(): v for k, v in answer.headers.items()}["allow"] == "POST"
    assert_error(api.with_key(None).raw(method, "/v3/scenario/read", None, {}), 401)  # after the key check


def test_non_get_on_a_public_route_is_405_and_needs_auth(api):
    answer = api.raw("POST", "/health", b"{}", api.auth_headers())
    assert_error(answer, 405)
    assert {k.lower(): v for k, v in answer.headers.items()}["allow"] == "GET, HEAD"
    assert_error(api.raw("POST", "/openapi.json", b"{}", api.auth_headers()), 405)
    assert_error(api.raw("POST", "/health", b"{}", {}), 401)


def test_public_get_routes_need_no_auth_and_are_not_envelopes(api):
    health = api.raw("GET", "/health", None, {})
    assert health.status == 200 and health.body == {"status": "ok", "formation": "off"}  # no model configured
    spec = api.raw("GET", "/openapi.json", None, {})
    assert spec.status == 200 and "paths" in spec.body and "code" not in spec.body
    docs = api.raw("GET", "/docs", None, {})
    assert docs.status == 200 and "<html" in docs.body.lower()


def test_404_and_405_come_before_the_role_check(api):
    _, secret = make_key(api, "reader", ["*"])
    reader = api.with_key(secret)
    assert_error(reader.post("/v3/no/such/route", {}), 404)
    assert_error(reader.raw("GET", "/v3/scenario/write", None, reader.auth_headers()), 405)
    assert_error(reader.raw("GET", "/v3/admin/keys/create", None, reader.auth_headers()), 405)


# --- 403 role → 413 → 415 → 400 → 422 ------------------------------------------------------------


@pytest.fixture(scope="module")
def reader_and_writer(api):
    return api.with_key(make_key(api, "reader", ["*"])[1]), api.with_key(make_key(api, "writer", ["*"])[1])


def _big_body(scope, size: int) -> bytes:
    """A JSON object of exactly ``size`` bytes that reads scope's e/big.md."""
    base = json.dumps(scope.body(path="e/big.md", pad=""), separators=(",", ":")).encode()
    body = json.dumps(scope.body(path="e/big.md", pad="p" * (size - len(base))), separators=(",", ":")).encode()
    assert len(body) == size
    return body


@pytest.mark.parametrize(
    "case, raw, headers, writer_status, writer_message",
    [
        ("too large", None, {}, 413, None),
        ("encoding", b"{}", {"Content-Encoding": "br"}, 415, None),
        ("not json", b"{nope", {}, 400, "Invalid JSON body"),
        ("not an object", b"[1]", {}, 400, "Invalid JSON body"),
        ("no isolation", b"{}", {}, 422, "missing isolation fields: team_id, agent_id, user_id"),
        ("bad field", None, {}, 400, None),
    ],
)
def test_role_403_comes_before_size_encoding_json_isolation_and_fields(
    api, reader_and_writer, scope, case, raw, headers, writer_status, writer_message
):
    reader, writer = reader_and_writer
    if case == "too large":
        raw = _big_body(scope, int(MIB * 1.5))
    elif case == "bad field":
        raw = json.dumps(scope.body(path="../x.md", content="c")).encode()
    answer = post_raw(reader, "/v3/scenario/write", raw, headers)
    assert_error(answer, 403)
    answer = post_raw(writer, "/v3/scenario/write", raw, headers)
    assert_error(answer, writer_status, writer_message)


def test_body_of_exactly_one_mib_is_accepted_and_one_byte_more_is_413(api, scope):
    ok = post_raw(api, "/v3/scenario/read", _big_body(scope, MIB))
    assert ok.status == 200, ok.body
    assert ok.data["content"] is None
    too_big = post_raw(api, "/v3/scenario/read", _big_body(scope, MIB + 1))
    assert_error(too_big, 413)


def test_413_comes_before_415_and_400(api):
    raw = b"x" * (MIB + 10)
    assert_error(post_raw(api, "/v3/scenario/read", raw, {"Content-Encoding": "br"}), 413)
    assert_error(post_raw(api, "/v3/scenario/read", raw), 413)


def test_gzip_body_is_decoded(api, scope):
    body = json.dumps(scope.body(path="e/gz.md", content="zipped ✓ content")).encode()
    answer = post_raw(api, "/v3/scenario/write", gzip.compress(body), {"Content-Encoding": "gzip"})
    assert answer.status == 200, answer.body
    read = api.post("/v3/scenario/read", scope.body(path="e/gz.md"))
    assert read.data["content"].endswith("\n\nzipped ✓ content")


def test_gzip_with_several_members_is_decoded_whole(api, scope):
    body = json.dumps(scope.body(path="e/multi.md", content="two members")).encode()
    raw = gzip.compress(body[:10]) + gzip.compress(body[10:])
    assert post_raw(api, "/v3/scenario/write", raw, {"Content-Encoding": "gzip"}).status == 200
    assert api.post("/v3/scenario/read", scope.body(path="e/multi.md")).data["content"].endswith("two members")


@pytest.mark.parametrize("damage", ["truncated", "garbage", "plain"])
def test_broken_gzip_is_400(api, scope, damage):
    body = json.dumps(scope.body(path="e/broken.md", content="c")).encode()
    raw = {"truncated": gzip.compress(body)[:-8], "garbage": gzip.compress(body) + b"junk", "plain": body}[damage]
    answer = post_raw(api, "/v3/scenario/write", raw, {"Content-Encoding": "gzip"})
    assert_error(answer, 400)
    assert api.post("/v3/scenario/read", scope.body(path="e/broken.md")).data["content"] is None


def test_gzip_encoding_name_is_case_insensitive(api, scope):
    raw = gzip.compress(json.dumps(scope.body()).encode())
    assert post_raw(api, "/v3/scenario/count", raw, {"Content-Encoding": "GZIP"}).status == 200


def test_gzip_that_decodes_past_one_mib_is_413(api, scope):
    small_enough = gzip.compress(_big_body(scope, MIB))
    assert post_raw(api, "/v3/scenario/read", small_enough, {"Content-Encoding": "gzip"}).status == 200
    bomb = gzip.compress(_big_body(scope, MIB + 1))
    assert len(bomb) < 10_000
    assert_error(post_raw(api, "/v3/scenario/read", bomb, {"Content-Encoding": "gzip"}), 413)


@pytest.mark.parametrize("encoding", ["br", "deflate", "compress", "zstd"])
def test_other_content_encodings_are_415(api, scope, encoding):
    raw = json.dumps(scope.body()).encode()
    assert_error(post_raw(api, "/v3/scenario/count", raw, {"Content-Encoding": encoding}), 415)


def test_identity_encoding_is_accepted(api, scope):
    raw = json.dumps(scope.body()).encode()
    assert post_raw(api, "/v3/scenario/count", raw, {"Content-Encoding": "identity"}).status == 200


def test_content_type_is_not_checked(api, scope):
    raw = json.dumps(scope.body()).encode()
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/octet-stream"):
        answer = post_raw(api, "/v3/scenario/count", raw, {"Content-Type": content_type})
        assert answer.status == 200, (content_type, answer.body)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"   ",
        b"nope",
        b"{",
        b"[]",
        b'"text"',
        b"42",
        b"null",
        b"true",
        b'{"a": NaN}',
        b"\xff\xfe{}",
        b'{"a": 1} {"b": 2}',
    ],
)
def test_anything_but_a_json_object_is_400_invalid_json_body(api, raw):
    assert_error(post_raw(api, "/v3/scenario/count", raw), 400, "Invalid JSON body")


@pytest.mark.parametrize("field", ["content", "summary", "path", "user_id", "unknown_key"])
def test_lone_surrogate_escapes_are_400_invalid_json_body(api, scope, field):
    body = {**scope.body(path="e/s.md", content="c"), field: "PLACEHOLDER"}
    raw = json.dumps(body).replace("PLACEHOLDER", "x\\ud800y").encode()
    assert_error(post_raw(api, "/v3/scenario/write", raw), 400, "Invalid JSON body")
    assert api.post("/v3/scenario/read", scope.body(path="e/s.md")).data["content"] is None


def test_surrogate_pair_escapes_are_one_character(api, scope):
    raw = json.dumps(scope.body(path="e/p.md", content="PLACEHOLDER")).replace("PLACEHOLDER", "\\ud83d\\ude00")
    assert post_raw(api, "/v3/scenario/write", raw.encode()).status == 200
    assert api.post("/v3/scenario/read", scope.body(path="e/p.md")).data["content"].endswith("\n\n😀")


@pytest.mark.parametrize("depth", [120, 5_000, 200_000])
def test_absurdly_nested_bodies_are_400_not_500(api, scope, depth):
    raw = json.dumps(scope.body(path="e/d.md", content="c"))[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"
    assert_error(post_raw(api, "/v3/scenario/write", raw.encode()), 400, "Invalid JSON body")


def test_moderately_nested_unknown_keys_are_ignored(api, scope):
    deep = {"x": None}
    for _ in range(40):
        deep = {"x": [deep, None]}
    answer = api.post("/v3/scenario/write", scope.body(path="e/d.md", content="c", extra=deep))
    assert answer.status == 200, answer.body


def test_invalid_json_comes_before_missing_isolation(api):
    assert_error(post_raw(api, "/v3/core/read", b"[]"), 400, "Invalid JSON body")


# --- isolation -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, missing",
    [
        ({}, "team_id, agent_id, user_id"),
        ({"user_id": "u"}, "team_id, agent_id"),
        ({"team_id": "t", "user_id": "u"}, "agent_id"),
        ({"team_id": "t", "agent_id": "a"}, "user_id"),
        ({"team_id": " ", "agent_id": "", "user_id": "u"}, "team_id, agent_id"),
        ({"team_id": None, "agent_id": "a", "user_id": None}, "team_id, user_id"),
    ],
)
@pytest.mark.parametrize("route", ["/v3/scenario/ls", "/v3/scenario/write", "/v3/core/read", "/v3/core/write"])
def test_missing_isolation_fields_are_422_listed_in_order(api, route, body, missing):
    assert_error(api.post(route, body), 422, f"missing isolation fields: {missing}")


def test_isolation_falls_back_to_headers(api, scope):
    headers = {"x-tdai-team-id": scope.team_id, "x-tdai-agent-id": scope.agent_id, "x-tdai-user-id": scope.user_id}
    written = api.post("/v3/scenario/write", {"path": "h.md", "content": "via headers"}, headers)
    assert written.status == 200, written.body
    assert (written.data["team_id"], written.data["agent_id"]) == (scope.team_id, scope.agent_id)
    read = api.post("/v3/scenario/read", scope.body(path="h.md"))
    assert read.data["content"].endswith("via headers")


def test_body_isolation_wins_over_headers_and_null_falls_back(api, scope):
    other = make_scope()
    headers = {"x-tdai-team-id": other.team_id, "x-tdai-agent-id": other.agent_id, "x-tdai-user-id": "hdr"}
    written = api.post("/v3/scenario/write", scope.body(path="b.md", content="body wins"), headers)
    assert written.data["team_id"] == scope.team_id
    assert api.post("/v3/scenario/count", other.body()).data["count"] == 0
    fallback = api.post(
        "/v3/scenario/write",
        {"team_id": None, "agent_id": None, "user_id": None, "path": "n.md", "content": "null → header"},
        headers,
    )
    assert fallback.status == 200, fallback.body
    assert fallback.data["team_id"] == other.team_id
    assert api.post("/v3/scenario/count", other.body()).data["count"] == 1


@pytest.mark.parametrize(
    "field, value",
    [
        ("team_id", "客服"),
        ("team_id", ".hidden"),
        ("team_id", "a b"),
        ("team_id", "t" * 129),
        ("team_id", "a/b"),
        ("agent_id", "agent:1"),
        ("agent_id", "a\n"),
        ("user_id", "u" * 257),
        ("user_id", "bell\x07"),
        ("session_id", "s\x00"),
        ("task_id", "x" * 257),
        ("session_id", " s1"),  # white space around an id ("" means none)
        ("user_id", "del\x7f"),
        ("user_id", "c1\x85"),
    ],
)
def test_isolation_format_errors_are_400_naming_the_field(api, scope, field, value):
    answer = api.post("/v3/scenario/count", {**scope.body(), field: value})
    assert_error(answer, 400)
    assert answer.message.startswith(f"{field}: "), answer.message


def test_isolation_format_error_via_header_is_400(api, scope):
    answer = api.post("/v3/scenario/count", scope.body(), {"x-tdai-session-id": "tab\there"})
    assert_error(answer, 400)
    assert answer.message.startswith("session_id: ")


def test_isolation_type_error_is_400(api, scope):
    answer = api.post("/v3/scenario/count", {**scope.body(), "team_id": 7})
    assert_error(answer, 400)
    assert answer.message.startswith("team_id: ")


@pytest.mark.parametrize("team_id", ["a", "A-Z_0.9@x", "_lead", "-lead", "@lead", "t" * 64])
def test_valid_team_and_agent_ids_are_accepted(api, team_id):
    answer = api.post("/v3/scenario/count", {"team_id": team_id, "agent_id": team_id, "user_id": "客户 1"})
    assert answer.status == 200, answer.body


def test_missing_isolation_422_comes_before_format_400(api):
    assert_error(
        api.post("/v3/scenario/count", {"team_id": "客服", "user_id": "u"}), 422, "missing isolation fields: agent_id"
    )


def test_team_outside_the_keys_teams_is_403_before_field_validation(api, scope):
    _, secret = make_key(api, "writer", [scope.team_id])
    team_key = api.with_key(secret)
    other = make_scope()
    assert team_key.post("/v3/scenario/write", scope.body(path="ok.md", content="c")).status == 200
    assert_error(team_key.post("/v3/scenario/write", other.body(path="ok.md", content="c")), 403)
    assert_error(team_key.post("/v3/scenario/write", other.body(path="../bad", limit="x")), 403)
    assert_error(team_key.post("/v3/scenario/read", other.body(path="ok.md")), 403)
    # within its team, the same bad fields are 400; a malformed team id is 400 before the team check
    assert_error(team_key.post("/v3/scenario/write", scope.body(path="../bad")), 400)
    assert_error(team_key.post("/v3/scenario/write", {**other.body(path="ok.md"), "team_id": "bad team"}), 400)
    assert api.post("/v3/scenario/count", other.body()).data["count"] == 0


# --- field validation ----------------------------------------------------------------------------


def test_field_errors_name_each_field_joined_by_semicolons(api, scope):
    answer = api.post("/v3/scenario/write", scope.body(path="x", summary=3))
    assert_error(answer, 400)
    parts = answer.message.split("; ")
    assert [p.split(": ", 1)[0] for p in parts] == ["path", "content", "summary"], answer.message
    assert all(len(p.split(": ", 1)) == 2 and p.split(": ", 1)[1] for p in parts)


def test_field_errors_use_dotted_paths_with_zero_based_indices(api):
    answer = api.post("/v3/admin/keys/create", {"role": "reader", "team_ids": ["ok", "bad team", 3]})
    assert_error(answer, 400)
    assert [p.split(": ", 1)[0] for p in answer.message.split("; ")] == ["team_ids.1", "team_ids.2"]


@pytest.mark.parametrize(
    "route, fields, bad",
    [
        ("/v3/scenario/ls", {"limit": "10"}, "limit"),
        ("/v3/scenario/ls", {"limit": 10.0}, "limit"),
        ("/v3/scenario/ls", {"limit": True}, "limit"),
        ("/v3/scenario/ls", {"path_prefix": 5}, "path_prefix"),
        ("/v3/scenario/write", {"path": "a.md", "content": 5}, "content"),
        ("/v3/scenario/write", {"path": "a.md", "content": "c", "expected_version": "0"}, "expected_version"),
        ("/v3/scenario/write", {"path": ["a.md"], "content": "c"}, "path"),
        ("/v3/core/write", {"content": ["x"]}, "content"),
        ("/v3/core/write", {"content": {"text": "x"}}, "content"),
    ],
)
def test_types_are_checked_never_coerced(api, scope, route, fields, bad):
    answer = api.post(route, scope.body(**fields))
    assert_error(answer, 400)
    assert answer.message.startswith(f"{bad}: "), answer.message


@pytest.mark.parametrize("limit", [0, 1001, -1])
def test_limits_out_of_range_are_400(api, scope, limit):
    answer = api.post("/v3/scenario/ls", scope.body(limit=limit))
    assert_error(answer, 400)
    assert answer.message.startswith("limit: ")


def test_null_counts_as_absent(api, scope):
    assert_error(api.post("/v3/scenario/write", scope.body(path="n.md", content=None)), 400, "content: is required")
    listing = api.post("/v3/scenario/ls", scope.body(limit=None, path_prefix=None, next_token=None))
    assert listing.status == 200, listing.body
    assert listing.data["total"] == 0
    api.post("/v3/scenario/write", scope.body(path="n.md", content="c", summary="kept"))
    again = api.post("/v3/scenario/write", scope.body(path="n.md", content="d", summary=None, expected_version=None))
    assert again.status == 200 and again.data["version"] == 2
    assert api.post("/v3/scenario/read", scope.body(path="n.md")).data["summary"] == "kept"


def test_unknown_keys_are_ignored(api, scope):
    answer = api.post(
        "/v3/scenario/write", scope.body(path="u.md", content="c", surprise={"deep": [1, None]}, another=None)
    )
    assert answer.status == 200, answer.body
    created = api.post("/v3/admin/keys/create", {"role": "reader", "team_ids": [scope.team_id], "color": "blue"})
    assert created.status == 200, created.body
    assert "color" not in created.data


def test_user_key_header_is_accepted_and_ignored(api, scope):
    headers = {"x-tdai-user-key": "anything at all"}
    written = api.post("/v3/scenario/write", scope.body(path="k.md", content="c"), headers)
    assert written.status == 200, written.body
    plain = api.post("/v3/scenario/read", scope.body(path="k.md"))
    assert plain.data["version"] == 1


# --- roles ---------------------------------------------------------------------------------------


def test_reader_key_may_read_but_not_write(api, reader_and_writer, scope):
    reader, writer = reader_and_writer
    assert writer.post("/v3/scenario/write", scope.body(path="r.md", content="c")).status == 200
    assert reader.post("/v3/scenario/read", scope.body(path="r.md")).data["version"] == 1
    assert reader.post("/v3/core/read", scope.body()).status == 200
    for route, body in [
        ("/v3/scenario/write", scope.body(path="r.md", content="x")),
        ("/v3/scenario/rm", scope.body(path="r.md")),
        ("/v3/core/write", scope.body(content="x")),
    ]:
        assert_error(reader.post(route, body), 403)
    assert api.post("/v3/scenario/read", scope.body(path="r.md")).data["version"] == 1
    assert api.post("/v3/core/count", scope.body()).data["total"] == 0


def test_writer_key_may_not_administer(reader_and_writer):
    _, writer = reader_and_writer
    assert_error(writer.post("/v3/admin/keys/create", {"role": "reader"}), 403)
    assert_error(writer.post("/v3/admin/keys/list", {}), 403)
    assert_error(writer.post("/v3/audit/query", {}), 403)


# --- 409 -----------------------------------------------------------------------------------------


def test_409_is_not_retryable(api, scope):
    api.post("/v3/scenario/write", scope.body(path="c.md", content="c"))
    answer = api.post("/v3/scenario/write", scope.body(path="c.md", content="d", expected_version=0))
    assert_error(answer, 409)
    assert answer.body["retryable"] is False
    assert answer.body["data"] == {"current_version": 1}
