"""clock.py: request times (RFC 3339 as requests may write it), stored times, ordered ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_hub import clock
from memory_hub.clock import (
    ISSUED_ID,
    MAX_SECONDS,
    MIN_SECONDS,
    TimeFormatError,
    compact_stamp,
    day_of,
    format_ms,
    lower_bound_ms,
    ordered_id,
    parse_ms,
    parse_ns,
    upper_bound_ms,
)

NEW_YEAR_2026_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MIN_MS = MIN_SECONDS * 1000
MAX_MS = MAX_SECONDS * 1000 + 999
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2026-01-01T00:00:00Z", NEW_YEAR_2026_MS),
        ("2026-01-01T08:00:00+08:00", NEW_YEAR_2026_MS),
        ("2025-12-31T19:00:00-05:00", NEW_YEAR_2026_MS),
        ("2025-12-31T18:30:00-05:30", NEW_YEAR_2026_MS),
        ("2026-01-01T00:00:00+00:00", NEW_YEAR_2026_MS),
        ("2026-01-01T00:00:00-00:00", NEW_YEAR_2026_MS),
        ("2026-01-01T23:59:00+23:59", NEW_YEAR_2026_MS),
        ("2025-12-31T00:01:00-23:59", NEW_YEAR_2026_MS),
        ("2026-01-01T00:00:00.123Z", NEW_YEAR_2026_MS + 123),
        ("2026-01-01T00:00:00.1Z", NEW_YEAR_2026_MS + 100),
        ("2026-01-01T00:00:00.999999999Z", NEW_YEAR_2026_MS + 999),
        ("2024-02-29T12:00:00Z", 1_709_208_000_000),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.999Z", -1),
        ("0001-01-01T00:00:00Z", MIN_MS),
        ("0001-01-01T00:30:00+00:30", MIN_MS),
        ("9999-12-31T23:59:59.999Z", MAX_MS),
        ("9999-12-31T23:29:59.999-00:30", MAX_MS),
    ],
)
def test_parse_ms_accepts(text, ms):
    assert parse_ms(text) == ms


def test_offsets_name_the_same_instant():
    assert parse_ns("2026-01-01T08:00:00+08:00") == parse_ns("2026-01-01T00:00:00Z")
    assert parse_ns("2026-01-01T08:00:00.5+08:00") == parse_ns("2026-01-01T00:00:00.500000000Z")


def test_parse_ns_keeps_every_fraction_digit():
    assert parse_ns("1970-01-01T00:00:00.000000001Z") == 1
    assert parse_ns("1970-01-01T00:00:00.123456789Z") == 123_456_789
    assert parse_ns("1970-01-01T00:00:00.12Z") == 120_000_000


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-01",  # date only
        "2026-01-01T00:00:00",  # no offset
        "2026-01-01T00:00Z",  # no seconds
        "2026-01-01 00:00:00Z",  # space, not T
        "2026-01-01t00:00:00Z",  # lower-case t
        "2026-01-01T00:00:00z",  # lower-case z
        "2026-01-01T00:00:00+0800",  # offset without colon
        "2026-01-01T00:00:00+08",
        "２０２６-01-01T00:00:00Z",  # fullwidth digits
        "٢٠٢٦-01-01T00:00:00Z",  # Arabic-Indic digits
        "2026-01-01T00:00:00+٠٨:00",
        "2026-01-01T00:00:00+24:00",  # offset beyond ±23:59
        "2026-01-01T00:00:00-24:00",
        "2026-01-01T00:00:00+23:60",
        "2026-01-01T00:00:00+99:99",
        "2026-02-30T00:00:00Z",  # impossible dates and times
        "2025-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z",
        "2026-12-31T23:59:60Z",  # leap second
        "2016-12-31T23:59:60Z",
        "2026-01-01T00:00:00.1234567890Z",  # ten fraction digits
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00,5Z",
        "0000-01-01T00:00:00Z",  # year 0
        "0001-01-01T00:00:00+00:01",  # year 0 once the offset is applied
        "0001-01-01T00:00:00.999+00:01",
        "9999-12-31T23:59:59-00:01",  # year 10000 once the offset is applied
        "9999-12-31T23:59:59.5-23:59",
        "12026-01-01T00:00:00Z",
        "+2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z\n",
        " 2026-01-01T00:00:00Z",
        "",
    ],
)
def test_parse_rejects(text):
    with pytest.raises(TimeFormatError):
        parse_ns(text)
    with pytest.raises(ValueError):  # TimeFormatError is a ValueError for callers that catch those
        parse_ms(text)


@st.composite
def written_times(draw):
    """(text, instant in ns): a UTC instant written with a random offset and fraction precision."""
    seconds = draw(st.integers(MIN_SECONDS, MAX_SECONDS))
    digits = draw(st.integers(0, 9))
    fraction = draw(st.integers(0, 10**digits - 1)) if digits else 0
    offset_minutes = draw(st.integers(-(23 * 60 + 59), 23 * 60 + 59))
    if not MIN_SECONDS <= seconds + offset_minutes * 60 <= MAX_SECONDS:
        offset_minutes = 0  # the local time written must itself be in 0001-9999
    local = EPOCH + timedelta(seconds=seconds + offset_minutes * 60)
    sign = "+" if offset_minutes >= 0 else "-"
    hours, minutes = divmod(abs(offset_minutes), 60)
    zone = (
        draw(st.sampled_from(["Z", f"{sign}{hours:02d}:{minutes:02d}"]))
        if offset_minutes == 0
        else f"{sign}{hours:02d}:{minutes:02d}"
    )
    frac = f".{fraction:0{digits}d}" if digits else ""
    text = f"{local.year:04d}-{local:%m-%dT%H:%M:%S}{frac}{zone}"
    return text, seconds * 1_000_000_000 + (fraction * 10 ** (9 - digits) if digits else 0)


@settings(max_examples=300)
@given(written_times())
def test_parse_ns_property(written):
    text, ns = written
    assert parse_ns(text) == ns
    assert parse_ms(text) == ns // 1_000_000
    assert upper_bound_ms(text) == ns // 1_000_000
    assert lower_bound_ms(text) == -(-ns // 1_000_000)
    assert 0 <= lower_bound_ms(text) - upper_bound_ms(text) <= 1


# ---------------------------------------------------------------- bounds at the precision written


@pytest.mark.parametrize(
    ("text", "lower", "upper"),
    [
        ("2026-01-01T00:00:00Z", 0, 0),
        ("2026-01-01T00:00:00.0005Z", 1, 0),
        ("2026-01-01T00:00:00.000000001Z", 1, 0),
        ("2026-01-01T00:00:00.001Z", 1, 1),
        ("2026-01-01T00:00:00.001000Z", 1, 1),
        ("2026-01-01T00:00:00.0019Z", 2, 1),
        ("2026-01-01T00:00:00.999999999Z", 1000, 999),
    ],
)
def test_bounds_compare_at_the_precision_written(text, lower, upper):
    assert lower_bound_ms(text) == NEW_YEAR_2026_MS + lower
    assert upper_bound_ms(text) == NEW_YEAR_2026_MS + upper


def test_bounds_before_1970_round_toward_the_right_side():
    # -0.5 ms: the first stored ms at or after it is 0, the last at or before it is -1
    assert lower_bound_ms("1969-12-31T23:59:59.9995Z") == 0
    assert upper_bound_ms("1969-12-31T23:59:59.9995Z") == -1
    assert parse_ms("1969-12-31T23:59:59.9995Z") == -1


# ---------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (NEW_YEAR_2026_MS + 7, "2026-01-01T00:00:00.007Z"),
        (MIN_MS, "0001-01-01T00:00:00.000Z"),
        (MAX_MS, "9999-12-31T23:59:59.999Z"),
        (parse_ms("0999-03-04T05:06:07.089Z"), "0999-03-04T05:06:07.089Z"),
    ],
)
def test_format_ms(ms, text):
    assert format_ms(ms) == text
    assert clock.iso(ms) == text


def test_iso_of_none_and_float():
    assert clock.iso(None) is None
    assert clock.iso(1.9) == "1970-01-01T00:00:00.001Z"


def test_compact_stamp_and_day():
    assert compact_stamp(NEW_YEAR_2026_MS + 3_723_000) == "20260101_010203"
    assert compact_stamp(MIN_MS) == "00010101_000000"
    assert day_of(NEW_YEAR_2026_MS - 1) == "2025-12-31"
    assert day_of(MIN_MS) == "0001-01-01"


TIMES = st.integers(MIN_MS, MAX_MS)


@settings(max_examples=300)
@given(TIMES)
def test_format_round_trip(ms):
    text = format_ms(ms)
    assert len(text) == 24
    assert parse_ms(text) == ms
    assert lower_bound_ms(text) == upper_bound_ms(text) == ms


@settings(max_examples=300)
@given(TIMES, TIMES)
def test_string_order_is_time_order(a, b):
    assert (format_ms(a) < format_ms(b)) == (a < b)
    assert (format_ms(a) == format_ms(b)) == (a == b)


# ---------------------------------------------------------------- ordered ids


@pytest.mark.parametrize("prefix", ["msg-", "atom-"])
def test_ordered_ids_strictly_increase_and_match_issued_form(prefix):
    ids = [ordered_id(prefix) for _ in range(3000)]
    assert all(ISSUED_ID.fullmatch(i) for i in ids)
    assert all(a < b for a, b in pairwise(ids))


def test_ordered_ids_keep_increasing_when_the_clock_steps_back(monkeypatch):
    first = ordered_id("msg-")
    monkeypatch.setattr(clock, "now_ms", lambda: 1)  # the wall clock jumped back to 1970
    later = [ordered_id("msg-") for _ in range(50)]
    assert all(a < b for a, b in pairwise([first, *later]))
    assert all(ISSUED_ID.fullmatch(i) for i in later)


def test_ordered_ids_carry_their_millisecond():
    before = clock.now_ms()
    issued = ordered_id("atom-")
    after = clock.now_ms()
    assert before <= int(issued[len("atom-") :][:12], 16) <= after


def test_issued_id_pattern_is_strict():
    good = ordered_id("msg-")
    assert ISSUED_ID.fullmatch(good)
    for bad in [good.upper().replace("MSG-", "msg-"), good + "0", good[:-1], "rec-" + good[4:], good + "\n"]:
        assert not ISSUED_ID.fullmatch(bad)
