"""Time words in a search query (pure): the span of time an English question points at.

"What did I cook last week?", "the trip in May 2023", "three days ago", "on Monday" — each names a
span of time relative to a reference (the search's ``reference_time``, default the request's time)
or outright. ``window`` reads them and answers the span ``[start, end)`` in epoch milliseconds
(UTC), or None when the query names no time, so such a query ranks as it would without this module.

Spans are generous on purpose: people say "last week" of something nine days ago and "a month
ago" of something five weeks ago, and a span only lifts the turns inside it (it never drops one).
What is read:

- ``today``, ``tonight``, ``this morning``/``afternoon``/``evening``, ``yesterday``, ``the day
  before yesterday``, ``tomorrow``: that day;
- ``N days|weeks|months|years ago`` (N a number or a word up to twelve, ``a``/``an``, ``a couple
  of``, ``a few``): that day (± 1 day), week (± 1 week), calendar month (± 15 days) or year;
- ``last|this|next week|weekend|month|year`` (``past``/``previous`` as ``last``): the week as the
  14 days before the reference (``this``: the 7 before and the day itself), the last Saturday and
  Sunday, the calendar month or year (± 7 days for a month);
- ``last|on|this <weekday>``: the latest such day before the reference;
- month names with or without a day and a year: ``May 2023``, ``in May`` (the latest May not after
  the reference), ``May 7``, ``7 May 2023``, ``the 7th of May``: that month or day;
- a year after ``in``, ``during``, ``of`` or ``since`` (``in 2023``): that year (``since``: from it
  to the reference).

Several expressions make one span from the earliest start to the latest end. One that would
leave the calendar (years 1-9999, what a reference time may be) names no span."""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta

Span = tuple[int, int]
"""[start, end) in epoch milliseconds."""

DAY = timedelta(days=1)

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
MONTHS["sept"] = 9
WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a few": 3, "few": 3, "several": 3,
}  # fmt: skip

_MONTH = r"(?P<month>" + "|".join(sorted((re.escape(m) for m in MONTHS), key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY_FIRST = _DAY.replace("?P<day>", "?P<d1>")
_MONTH_FIRST = _MONTH.replace("?P<month>", "?P<m1>")
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + ")"


def _day_span(day: date, slack: int = 0) -> Span:
    return _ms(day - slack * DAY), _ms(day + (1 + slack) * DAY)


def _ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def _month_span(year: int, month: int, slack_days: int = 0) -> Span:
    first = date(year, month, 1)
    last = date(year, month, calendar.monthrange(year, month)[1])
    return _ms(first - slack_days * DAY), _ms(last + (1 + slack_days) * DAY)


def _months_back(today: date, n: int) -> tuple[int, int]:
    index = today.year * 12 + today.month - 1 - n
    return index // 12, index % 12 + 1


def _count(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word]


def _ago(today: date, m: re.Match[str]) -> Span | None:
    n = _count(m["count"])
    unit = m["unit"]
    if unit == "day":
        return _day_span(today - n * DAY, slack=1)
    if unit == "week":
        return _ms(today - (n + 1) * 7 * DAY), _ms(today - (n - 1) * 7 * DAY + DAY)
    if unit == "month":
        return _month_span(*_months_back(today, n), slack_days=15)
    return _month_span(today.year - n, 1)[0], _month_span(today.year - n, 12)[1]


def _relative(today: date, m: re.Match[str]) -> Span | None:
    which = {"past": "last", "previous": "last"}.get(m["which"], m["which"])
    step = {"last": -1, "this": 0, "next": 1}[which]
    unit = m["unit"]
    if unit == "week":
        return {
            -1: (_ms(today - 14 * DAY), _ms(today)),
            0: (_ms(today - 7 * DAY), _ms(today + DAY)),
            1: (_ms(today), _ms(today + 14 * DAY)),
        }[step]
    if unit == "weekend":
        saturday = (
            today - ((today.weekday() - 5) % 7 or 7) * DAY if step <= 0 else today + ((5 - today.weekday()) % 7) * DAY
        )
        return _ms(saturday - DAY), _ms(saturday + 3 * DAY)
    if unit == "month":
        return _month_span(*_months_back(today, -step), slack_days=7)
    year = today.year + step
    return _month_span(year, 1)[0], _month_span(year, 12)[1]


def _weekday(today: date, m: re.Match[str]) -> Span | None:
    back = (today.weekday() - WEEKDAYS[m["weekday"]]) % 7 or 7
    return _day_span(today - back * DAY)


def _year(today: date, m: re.Match[str]) -> Span | None:
    year = int(m["year"])
    if m["prep"] == "since":
        return _month_span(year, 1)[0], _ms(today + DAY)
    return _month_span(year, 1)[0], _month_span(year, 12)[1]


def _said_day(today: date, m: re.Match[str]) -> Span | None:
    offset = {"yesterday": -1, "tomorrow": 1, "the day before yesterday": -2}.get(m["word"], 0)
    return _day_span(today + offset * DAY)


def _named_day(today: date, m: re.Match[str]) -> Span | None:
    """``7 May 2023`` (day first: groups d1, m1) or ``May 7, 2023`` / ``May 2023`` / ``May``."""
    groups = m.groupdict()
    month_name = groups.get("m1") or groups.get("month")
    day = groups.get("d1") or groups.get("day")
    if month_name is None:
        return None
    if month_name == "may" and day is None and groups.get("year") is None and not _month_context(m):
        return None  # "may" alone is mostly the verb
    month = MONTHS[month_name]
    year = int(groups["year"]) if groups.get("year") else (today.year if month <= today.month else today.year - 1)
    if day is None:
        return _month_span(year, month)
    if not 1 <= int(day) <= calendar.monthrange(year, month)[1]:
        return None
    return _day_span(date(year, month, int(day)))


def _month_context(m: re.Match[str]) -> bool:
    before = m.string[: m.start()].rstrip()
    return before.endswith((" in", " during", " of", " since", " early", " late", " mid")) or before in ("in", "during")


Reader = Callable[[date, re.Match[str]], "Span | None"]

PATTERNS: list[tuple[re.Pattern[str], Reader]] = [
    (
        re.compile(r"\b(?P<word>the day before yesterday|yesterday|today|tonight|tomorrow"
                   r"|this (?:morning|afternoon|evening))\b"),
        _said_day,
    ),
    (re.compile(rf"\b{_COUNT} (?P<unit>day|week|month|year)s? ago\b"), _ago),
    (re.compile(r"\b(?P<which>last|past|previous|this|next) (?P<unit>weekend|week|month|year)\b"), _relative),
    (re.compile(r"\b(?:last|on|this) (?P<weekday>" + "|".join(WEEKDAYS) + r")\b"), _weekday),
    (re.compile(rf"\b(?:{_DAY_FIRST} (?:of )?{_MONTH_FIRST}|{_MONTH}(?: {_DAY})?)(?:,? {_YEAR})?\b"), _named_day),
    (re.compile(rf"\b(?P<prep>in|during|of|since) {_YEAR}\b"), _year),
]  # fmt: skip


def _spans(text: str, today: date) -> Iterator[Span]:
    for pattern, read in PATTERNS:
        for m in pattern.finditer(text):
            try:
                span = read(today, m)
            except (OverflowError, ValueError):
                continue  # past the calendar's ends (years 1-9999: "next year" of 9999): no span to lift
            if span is not None and span[0] < span[1]:  # "since 2023" said in 2000 names nothing
                yield span


def window(query: str, reference_ms: int) -> Span | None:
    """The span of time ``query`` names, read against ``reference_ms``; None when it names none."""
    text = re.sub(r"\s+", " ", query.lower())
    today = datetime.fromtimestamp(reference_ms / 1000, UTC).date()
    spans = list(_spans(text, today))
    if not spans:
        return None
    return min(s for s, _ in spans), max(e for _, e in spans)
