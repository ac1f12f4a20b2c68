"""edge/pipeline.py, the pure parts: strict JSON, numbers beyond a double, nulls, isolation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_hub.domain.scope import Scope
from memory_hub.edge.errors import BadRequest, MissingIsolation
from memory_hub.edge.pipeline import (
    INVALID_JSON,
    ISOLATION_HEADERS,
    MAX_JSON_DEPTH,
    drop_nulls,
    dumps,
    overflows,
    parse_object,
    resolve_isolation,
)
from memory_hub.edge.routes import ROUTES


def _invalid(data: bytes) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_object(data)
    assert caught.value.message == INVALID_JSON
    assert caught.value.status == 400


# ---------------------------------------------------------------- parse_object


def test_parses_an_object():
    assert parse_object('{"a": [1, 2.5, "中", null, true], "b": {"c": -0}}'.encode()) == {
        "a": [1, 2.5, "中", None, True],
        "b": {"c": 0},
    }


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_rejects_nan_and_infinity_literals(literal):
    _invalid(b'{"a": ' + literal + b"}")
    _invalid(b'{"a": {"b": [' + literal + b"]}}")


@pytest.mark.parametrize("data", [b"[]", b"[{}]", b"1", b'"text"', b"null", b"true", b""])
def test_rejects_anything_but_an_object(data):
    _invalid(data)


@pytest.mark.parametrize(
    "data",
    [
        b"{",
        b'{"a": 1,}',
        b"{'a': 1}",
        b'{"a": 1} x',
        b'{"a": 01}',
        b'{"a": "\xff"}',
        b'{"a": "\xed\xa0\x80"}',
        b"\xef\xbb\xbf{}",
    ],
)
def test_rejects_malformed_json_and_utf8(data):
    _invalid(data)


def _nested_objects(depth: int) -> bytes:
    return (b'{"a":' * depth)[:-5] + b"{}" + b"}" * (depth - 1) if depth > 1 else b"{}"


def test_depth_limit_is_exactly_100():
    deepest = _nested_objects(MAX_JSON_DEPTH)
    assert json.loads(deepest)  # sanity: valid JSON of exactly 100 nested objects
    value = parse_object(deepest)
    depth = 0
    while isinstance(value, dict):
        depth, value = depth + 1, value.get("a")
    assert depth == MAX_JSON_DEPTH
    _invalid(_nested_objects(MAX_JSON_DEPTH + 1))


def test_depth_counts_arrays_too():
    assert parse_object(b'{"a":' + b"[" * 99 + b"]" * 99 + b"}")
    _invalid(b'{"a":' + b"[" * 100 + b"]" * 100 + b"}")


def test_very_deep_input_is_a_400_not_a_crash():
    _invalid(b'{"a":' + b"[" * 200_000 + b"]" * 200_000 + b"}")


@pytest.mark.parametrize(
    "data",
    [rb'{"a": "\ud800"}', rb'{"a": "x\udfffy"}', rb'{"\udc00": 1}', rb'{"a": ["\uD83D"]}', rb'{"a": "\ude00\ud83d"}'],
)
def test_rejects_lone_surrogates(data):
    _invalid(data)


def test_accepts_surrogate_pairs():
    assert parse_object(rb'{"a": "\ud83d\ude00", "\uD83D\uDE00": 1}') == {"a": "😀", "😀": 1}


# ---------------------------------------------------------------- numbers beyond a finite double


@pytest.mark.parametrize(
    ("data", "paths"),
    [
        (b'{"metadata": {"x": 1e999}}', ["metadata.x"]),
        (b'{"metadata": {"x": -1e999}}', ["metadata.x"]),
        (b'{"n": ' + b"9" * 400 + b"}", ["n"]),
        (b'{"n": -' + b"9" * 400 + b"}", ["n"]),
        (b'{"n": 2' + b"0" * 308 + b"}", ["n"]),  # 2e308 as an integer: beyond the largest double
        (b'{"n": 1.8e308}', ["n"]),
        (b'{"a": [1, 1e999, {"b": [2, -1E+400]}], "c": 1e999}', ["a.1", "a.2.b.1", "c"]),
    ],
)
def test_overflows_are_reported_with_their_path(data, paths):
    assert overflows(parse_object(data)) == paths


@pytest.mark.parametrize(
    "data",
    [
        b'{"n": 1' + b"0" * 308 + b"}",  # 1e308 as an integer still fits
        b'{"n": 1.7976931348623157e308}',
        b'{"n": -1.7976931348623157e308}',
        b'{"n": 1e-999}',  # underflow is zero, not an error
        b'{"n": 12345678901234567890123}',
    ],
)
def test_large_but_finite_numbers_are_fine(data):
    assert overflows(parse_object(data)) == []


def test_overflows_of_plain_values():
    assert overflows({"a": [1, 2.0, "1e999"], "b": None}) == []


# ---------------------------------------------------------------- drop_nulls


def test_drop_nulls_removes_null_keys_at_every_level():
    body = {"a": None, "b": 1, "c": {"d": None, "e": [{"f": None, "g": 0}]}, "h": [None, 1]}
    assert drop_nulls(body) == {"b": 1, "c": {"e": [{"g": 0}]}, "h": [None, 1]}


def test_drop_nulls_keeps_nulls_inside_metadata():
    body = {"metadata": {"x": None, "y": {"z": None}}, "nested": {"metadata": {"k": None}, "j": None}}
    assert drop_nulls(body) == {"metadata": {"x": None, "y": {"z": None}}, "nested": {"metadata": {"k": None}}}


def test_drop_nulls_drops_a_null_metadata_itself():
    assert drop_nulls({"metadata": None, "a": 1}) == {"a": 1}


def test_drop_nulls_keeps_the_routes_nullable_keys_at_the_top_only():
    keep = ROUTES["/v3/memory/update"].nullable
    assert keep == ("retention_days",)
    assert drop_nulls({"retention_days": None, "name": None}, keep) == {"retention_days": None}
    assert drop_nulls({"x": {"retention_days": None}}, keep) == {"x": {}}
    assert drop_nulls({"content_ids": None}, ROUTES["/v3/user-memory/delete"].nullable) == {"content_ids": None}
    assert drop_nulls({"content_ids": None}) == {}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "metadata"]), inner, max_size=3)
    ),
    max_leaves=15,
)


def _null_keys_outside_metadata(value) -> bool:
    if isinstance(value, dict):
        return any(v is None or (k != "metadata" and _null_keys_outside_metadata(v)) for k, v in value.items())
    if isinstance(value, list):
        return any(_null_keys_outside_metadata(v) for v in value)
    return False


@settings(max_examples=200)
@given(st.dictionaries(st.sampled_from(["a", "b", "metadata", "keep"]), JSON, max_size=4))
def test_drop_nulls_property(body):
    result = drop_nulls(body, ("keep",))
    assert not _null_keys_outside_metadata({k: v for k, v in result.items() if k != "keep"})
    for key, value in body.items():
        if key == "keep":
            assert key in result
        if value is None and key != "keep":
            assert key not in result
        if key == "metadata" and value is not None:
            assert result["metadata"] == value
    assert drop_nulls(result, ("keep",)) == result  # idempotent


# ---------------------------------------------------------------- resolve_isolation

BASE = {"team_id": "team", "agent_id": "agent", "user_id": "user"}


def test_isolation_from_the_body():
    assert resolve_isolation({**BASE, "session_id": "s", "task_id": "t"}, {}) == Scope(
        "team", "agent", "user", "s", "t"
    )


def test_isolation_falls_back_to_headers():
    headers = {ISOLATION_HEADERS[k]: f"h-{k}" for k in ISOLATION_HEADERS}
    assert resolve_isolation({}, headers) == Scope("h-team_id", "h-agent_id", "h-user_id", "h-session_id", "h-task_id")
    assert resolve_isolation({"team_id": "body"}, headers).team_id == "body"  # the body wins
    assert resolve_isolation({"user_id": "u"}, headers) == Scope(
        "h-team_id", "h-agent_id", "u", "h-session_id", "h-task_id"
    )


def test_header_names():
    assert ISOLATION_HEADERS == {
        "team_id": "x-tdai-team-id",
        "agent_id": "x-tdai-agent-id",
        "user_id": "x-tdai-user-id",
        "session_id": "x-tdai-session-id",
        "task_id": "x-tdai-task-id",
    }


@pytest.mark.parametrize("blank", ["", "   ", "\u3000", "\t\n", "\u00a0\u2003", "\x85"])
def test_blank_isolation_is_missing_422(blank):
    with pytest.raises(MissingIsolation) as caught:
        resolve_isolation({**BASE, "team_id": blank}, {})
    assert caught.value.status == 422
    assert caught.value.message == "missing isolation fields: team_id"


def test_blank_body_value_does_not_fall_back_to_the_header():
    with pytest.raises(MissingIsolation):
        resolve_isolation({**BASE, "user_id": "  "}, {"x-tdai-user-id": "from-header"})


def test_all_missing_are_named_in_order():
    with pytest.raises(MissingIsolation) as caught:
        resolve_isolation({"session_id": "s"}, {})
    assert caught.value.message == "missing isolation fields: team_id, agent_id, user_id"


def test_missing_comes_before_format_errors():
    with pytest.raises(MissingIsolation):
        resolve_isolation({"team_id": "bad team", "agent_id": "a"}, {})


@pytest.mark.parametrize("control", ["\x1f", "\x1c", "\x00", "\x7f", "\x9f"])
def test_control_character_team_is_400_not_missing(control):
    """U+001C-U+001F pass Python's isspace, but they are controls, never blanks: a format error."""
    with pytest.raises(BadRequest) as caught:
        resolve_isolation({**BASE, "team_id": control}, {})
    assert caught.value.status == 400
    assert caught.value.message.startswith("team_id: ")


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("team_id", "t" * 65, "team_id: must match ^[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,63}$"),
        ("agent_id", ".agent", "agent_id: must match ^[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,63}$"),
        ("user_id", "u" * 257, "user_id: must be 1-256 characters"),
        ("user_id", "u\x1fu", "user_id: must not contain control characters"),
        ("session_id", "s\x00", "session_id: must not contain control characters"),
        ("task_id", "t" * 257, "task_id: must be 1-256 characters"),
        ("team_id", 123, "team_id: must be a string"),
        ("user_id", ["u"], "user_id: must be a string"),
        ("session_id", {"s": 1}, "session_id: must be a string"),
    ],
)
def test_format_errors_are_400_and_named(field, value, problem):
    with pytest.raises(BadRequest) as caught:
        resolve_isolation({**BASE, field: value}, {})
    assert caught.value.message == problem


def test_64_char_team_is_fine():
    assert resolve_isolation({**BASE, "team_id": "t" * 64}, {}).team_id == "t" * 64


def test_several_format_errors_are_all_named():
    with pytest.raises(BadRequest) as caught:
        resolve_isolation({"team_id": "t" * 65, "agent_id": "a", "user_id": "u", "task_id": 5}, {})
    assert caught.value.message.split("; ") == [
        "team_id: must match ^[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,63}$",
        "task_id: must be a string",
    ]


def test_header_values_are_checked_too():
    with pytest.raises(BadRequest):
        resolve_isolation({"agent_id": "a", "user_id": "u"}, {"x-tdai-team-id": "t" * 65})
    with pytest.raises(MissingIsolation):
        resolve_isolation({"agent_id": "a", "user_id": "u"}, {"x-tdai-team-id": "\u3000"})


# ---------------------------------------------------------------- dumps


def test_dumps_is_strict_and_utf8():
    assert dumps({"a": "中", "b": [1, 2]}) == '{"a":"中","b":[1,2]}'
    with pytest.raises(ValueError):
        dumps({"a": float("nan")})
