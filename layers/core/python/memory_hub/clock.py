"""Times and time-ordered ids: shared by every layer, free of any AWS or request concern.

Requests give RFC 3339 times; answers use ``YYYY-MM-DDTHH:MM:SS.mmmZ`` in UTC (docs/RULES.md, Times)."""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import UTC, datetime, timedelta

# RFC 3339 as requests may write it: upper-case T and Z, 1-9 fraction digits, ASCII digits only.
_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})", re.ASCII)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NS_PER_MS = 1_000_000
MIN_SECONDS = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // timedelta(seconds=1)
MAX_SECONDS = (datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - _EPOCH) // timedelta(seconds=1)


class TimeFormatError(ValueError):
    pass


def now_ms() -> int:
    return time.time_ns() // NS_PER_MS


def format_ms(ms: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` in UTC: string order is time order."""
    dt = _EPOCH + timedelta(milliseconds=ms)
    # strftime's %Y does not pad years before 1000 on every platform
    return f"{dt.year:04d}-{dt:%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def iso(ms: int | float | None) -> str | None:
    return None if ms is None else format_ms(int(ms))


def parse_ns(value: str) -> int:
    """A request time as nanoseconds since 1970 UTC, at exactly the precision written (a filter bound
    is the exact instant written: missing fraction digits are zeros)."""
    match = _TIME.fullmatch(value)
    if not match:
        raise TimeFormatError("must be YYYY-MM-DDTHH:MM:SS[.fraction] followed by Z or +HH:MM/-HH:MM")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, offset = match.group(7) or "", match.group(8)
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        raise TimeFormatError("is not a valid date and time") from None
    shift = 0
    if offset != "Z":
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        if hours > 23 or minutes > 59:
            raise TimeFormatError("has an offset beyond ±23:59")
        shift = (hours * 60 + minutes) * 60 * (1 if offset[0] == "+" else -1)
    seconds = (moment - _EPOCH) // timedelta(seconds=1) - shift
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise TimeFormatError("is outside the years 0001-9999 in UTC")
    return seconds * 1_000_000_000 + int((fraction + "000000000")[:9])


def parse_ms(value: str) -> int:
    """A request time truncated to milliseconds (how times are stored)."""
    return parse_ns(value) // NS_PER_MS


def lower_bound_ms(value: str) -> int:
    """The first stored millisecond at or after the instant written (``…00.0005Z`` → ``…00.001``)."""
    return -(-parse_ns(value) // NS_PER_MS)


def upper_bound_ms(value: str) -> int:
    """The last stored millisecond at or before the instant written."""
    return parse_ns(value) // NS_PER_MS


def time_window(time_start: str | None, time_end: str | None) -> tuple[int | None, int | None]:
    """Request time bounds as stored milliseconds, compared at the precision written
    (a bound is the exact instant written; both bounds are inclusive)."""
    return (lower_bound_ms(time_start) if time_start else None, upper_bound_ms(time_end) if time_end else None)


def compact_stamp(ms: int) -> str:
    """``YYYYMMDD_HHmmss`` for backup file names."""
    dt = _EPOCH + timedelta(milliseconds=ms)
    return f"{dt.year:04d}{dt:%m%d_%H%M%S}"


def day_of(ms: int) -> str:
    """``YYYY-MM-DD`` (UTC) of a time."""
    dt = _EPOCH + timedelta(milliseconds=ms)
    return f"{dt.year:04d}-{dt:%m-%d}"


def request_id() -> str:
    return "req-" + os.urandom(8).hex()


class _OrderedIds:
    """Ids that sort by creation time, strictly increasing within this process.

    After the prefix: 12 hex of milliseconds, 6 hex of a per-millisecond sequence, 8 random hex
    (two processes in one millisecond do not collide)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = 0
        self._seq = 0

    def next(self, prefix: str) -> str:
        with self._lock:
            ms = now_ms()
            if ms <= self._last_ms:
                ms, self._seq = self._last_ms, self._seq + 1
            else:
                self._last_ms, self._seq = ms, 0
            return f"{prefix}{ms:012x}{self._seq:06x}{os.urandom(4).hex()}"


_ids = _OrderedIds()
TIME_OFFSET_MS = 62_135_596_800_000  # ms from 0001-01-01 to 1970-01-01: times from year 1 are non-negative
_TIME_HEX = 13  # any time of the years 0001-9999, offset as above, in hex


def ordered_id(prefix: str) -> str:
    return _ids.next(prefix)


def message_id(at_ms: int) -> str:
    """A message's id: ordered like every id issued here, then the message's own time (13 hex,
    counted from year 1), so that storage can key the message by its time (``id_time``)."""
    return f"{ordered_id('msg-')}{at_ms + TIME_OFFSET_MS:0{_TIME_HEX}x}"


ISSUED_ID = re.compile(r"(msg|atom)-[0-9a-f]{26}|msg-[0-9a-f]{39}", re.ASCII)
_TIMED_ID = re.compile(r"msg-[0-9a-f]{39}", re.ASCII)


def id_time(value: str) -> int | None:
    """The message time an id of ``message_id`` carries (ms since 1970); None for any other id
    (an id issued before ids carried it, a record's, a derived one, a foreign one)."""
    if _TIMED_ID.fullmatch(value) is None:
        return None
    return int(value[-_TIME_HEX:], 16) - TIME_OFFSET_MS


def id_ms(value: str) -> int:
    """When an id issued here was issued (ms since 1970): the 12 hex after its prefix."""
    return int(value.split("-", 1)[1][:12], 16)


def issued_here(prefix: str, value: str) -> bool:
    """``value`` is an id this service could have issued with ``prefix`` (``msg-``, ``atom-``)."""
    return value.startswith(prefix) and ISSUED_ID.fullmatch(value) is not None
