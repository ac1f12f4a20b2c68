"""Time words in a conversation search: "in May 2023", "last week" lift the turns said then (hybrid),
read against ``reference_time`` (default the request's time); a query without them, and keyword
mode, rank as before."""

from __future__ import annotations

import pytest
from helpers import eventually

MAY = "We went hiking near the lake."
AUGUST = "Hiking, hiking: we went hiking near the lake again, hiking all day."


@pytest.fixture
def turns(api, scope):
    ids = {}
    for session, text, when in (("may", MAY, "2023-05-10T10:00:00Z"), ("august", AUGUST, "2023-08-10T10:00:00Z")):
        answer = api.post(
            "/v3/conversation/add",
            scope.body(session_id=session, messages=[{"role": "user", "content": text, "timestamp": when}]),
        )
        assert answer.status == 200, answer.body
        ids[text] = answer.data["accepted_ids"][0]
    # an embedding that missed its budget under load is put later (by the queue): the orders below
    # compare hybrid rankings, so both turns are found by meaning first
    eventually(
        lambda: sorted(order(api, scope, QUERY, mode="semantic")) == sorted(ids.values()),
        "the turns were not found by meaning",
    )
    return ids


def order(api, scope, query, **fields) -> list[str]:
    """The ids a search returns, best first — asked again while its query could not be embedded in
    its budget (``mode_used: keyword`` for a hybrid or semantic search: a loaded machine)."""

    def answered() -> tuple[list[str]] | None:
        found = api.post("/v3/conversation/search", scope.body(query=query, limit=5, **fields))
        assert found.status == 200, found.body
        if found.data["mode_used"] != fields.get("mode", "hybrid"):
            return None
        return ([m["id"] for m in found.data["messages"]],)

    return eventually(answered, f"{query!r} was not embedded")[0]


MONTH = {MAY: "May", AUGUST: "August"}
REFERENCE = {MAY: "2023-05-15T09:00:00Z", AUGUST: "2023-08-14T09:00:00Z"}
QUERY = "where did we go hiking near the lake"


def test_the_time_a_query_names_lifts_the_turns_said_then(api, scope, turns):
    first, second = order(api, scope, QUERY, mode="hybrid")  # whichever words and meaning prefer
    text = {v: k for k, v in turns.items()}
    assert order(api, scope, f"{QUERY} in {MONTH[text[second]]} 2023", mode="hybrid") == [second, first]
    assert order(api, scope, f"{QUERY} in {MONTH[text[first]]} 2023", mode="hybrid") == [first, second]
    # keyword mode stays exact BM25: the time words lift nothing there
    plain = order(api, scope, QUERY, mode="keyword")
    assert order(api, scope, f"{QUERY} in {MONTH[text[plain[1]]]} 2023", mode="keyword") == plain


def test_relative_time_words_are_read_against_reference_time(api, scope, turns):
    first, second = order(api, scope, QUERY, mode="hybrid")
    text = {v: k for k, v in turns.items()}
    timed = f"{QUERY} last week"
    assert order(api, scope, timed, mode="hybrid", reference_time=REFERENCE[text[second]]) == [second, first]
    assert order(api, scope, timed, mode="hybrid", reference_time=REFERENCE[text[first]]) == [first, second]
    # read against the request's time (years later) the week holds neither turn: no lift
    assert order(api, scope, timed, mode="hybrid") == [first, second]


def test_a_bad_reference_time_is_a_400(api, scope):
    found = api.post("/v3/conversation/search", scope.body(query="hiking last week", reference_time="last week"))
    assert found.status == 400, found.body


@pytest.mark.parametrize(
    "query,reference",
    [("hiking yesterday", "0001-01-01T00:00:00Z"), ("hiking next year", "9999-12-31T23:59:59Z")],
)
def test_time_words_past_the_calendars_ends_rank_as_none(api, scope, turns, query, reference):
    """A reference time at year 1 or 9999 is valid; a span it would push off the calendar names no
    time, and the query ranks as one without time words (it was a 500)."""
    for mode in ("keyword", "hybrid"):
        assert sorted(order(api, scope, query, mode=mode, reference_time=reference)) == sorted(turns.values())
