"""Time words in a query: the span each expression names, read against a reference time."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from memory_hub.domain.timewords import window

# Wednesday 12 July 2023, 15:00 UTC
REFERENCE = int(datetime(2023, 7, 12, 15, tzinfo=UTC).timestamp() * 1000)


def days(query: str, reference: int = REFERENCE) -> tuple[str, str] | None:
    """The span as [first day, day after the last) in ISO dates."""
    span = window(query, reference)
    if span is None:
        return None
    start, end = (datetime.fromtimestamp(ms / 1000, UTC).date().isoformat() for ms in span)
    return start, end


@pytest.mark.parametrize(
    ("query", "span"),
    [
        ("what did I eat yesterday?", ("2023-07-11", "2023-07-12")),
        ("the day before yesterday", ("2023-07-10", "2023-07-11")),
        ("this morning", ("2023-07-12", "2023-07-13")),
        ("three days ago", ("2023-07-08", "2023-07-11")),  # ± a day
        ("3 days ago", ("2023-07-08", "2023-07-11")),
        ("a couple of weeks ago", ("2023-06-21", "2023-07-06")),
        ("2 months ago", ("2023-04-16", "2023-06-16")),  # May ± 15 days
        ("a year ago", ("2022-01-01", "2023-01-01")),
        ("What did I cook last week?", ("2023-06-28", "2023-07-12")),
        ("this week", ("2023-07-05", "2023-07-13")),
        ("last weekend", ("2023-07-07", "2023-07-11")),  # Saturday 8 and Sunday 9, ± a day
        ("last month", ("2023-05-25", "2023-07-08")),  # June ± 7 days
        ("last year", ("2022-01-01", "2023-01-01")),
        ("on Monday", ("2023-07-10", "2023-07-11")),
        ("last Wednesday", ("2023-07-05", "2023-07-06")),  # the latest before the reference
        ("the trip in May 2023", ("2023-05-01", "2023-06-01")),
        ("in May", ("2023-05-01", "2023-06-01")),
        ("in December", ("2022-12-01", "2023-01-01")),  # the latest December not after the reference
        ("May 7", ("2023-05-07", "2023-05-08")),
        ("on 7 May 2021", ("2021-05-07", "2021-05-08")),
        ("the 7th of May", ("2023-05-07", "2023-05-08")),
        ("Sept. 3, 2022", ("2022-09-03", "2022-09-04")),
        ("in 2022", ("2022-01-01", "2023-01-01")),
        ("since 2021", ("2021-01-01", "2023-07-13")),
        ("between January and March 2023", ("2023-01-01", "2023-04-01")),  # one span over both
    ],
)
def test_each_expression_names_its_span(query, span):
    assert days(query) == span


@pytest.mark.parametrize(
    "query",
    [
        "When did Caroline go to the LGBTQ support group?",
        "What may I bring to the party?",  # "may" the verb
        "Feb 30",  # no such day
        "the 2023 report",  # a year without in/during/of/since
        "",
    ],
)
def test_a_query_without_time_words_names_no_span(query):
    assert window(query, REFERENCE) is None


def test_the_reference_moves_the_span():
    later = int(datetime(2024, 1, 3, tzinfo=UTC).timestamp() * 1000)
    assert days("yesterday", later) == ("2024-01-02", "2024-01-03")
    assert days("in May", later) == ("2023-05-01", "2023-06-01")
    assert days("last month", later) == ("2023-11-24", "2024-01-08")


@given(
    st.text(max_size=200),
    st.dates(min_value=date(1971, 1, 1), max_value=date(2099, 12, 31)),
)
def test_any_text_gives_no_span_or_an_ordered_one(text, day):
    reference = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)
    span = window(text, reference)
    assert span is None or span[0] < span[1]


@given(st.sampled_from(["yesterday", "last week", "in May", "3 days ago", "on Friday", "last month"]))
def test_relative_spans_end_by_the_day_after_the_reference(phrase):
    start, end = window(f"what happened {phrase}?", REFERENCE)  # type: ignore[misc]
    midnight_after = int(datetime(2023, 7, 13, tzinfo=UTC).timestamp() * 1000)
    assert start < REFERENCE and end <= midnight_after


EDGES = [
    "yesterday", "tomorrow", "last week", "next week", "last weekend", "next weekend", "next month", "last year",
    "next year", "999 years ago", "12 months ago", "3 weeks ago", "in May", "7 May", "on Friday", "since 2023",
]  # fmt: skip


@given(
    st.sampled_from(EDGES),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=st.just(UTC)),
)
@example("yesterday", datetime(1, 1, 1, tzinfo=UTC))
@example("next year", datetime(9999, 1, 1, tzinfo=UTC))
@example("tomorrow", datetime(9999, 12, 31, 12, tzinfo=UTC))
@example("10 years ago", datetime(5, 1, 1, tzinfo=UTC))
def test_a_reference_at_the_calendars_ends_names_a_span_or_none(phrase, moment):
    """Any reference time the API takes (years 1-9999): a span that would leave the calendar is
    not named, and the query ranks as one without time words — never an error."""
    span = window(f"what happened {phrase}?", int(moment.timestamp() * 1000))
    assert span is None or span[0] < span[1]
