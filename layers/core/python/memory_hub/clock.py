"""Time formats, time-ordered ids and request ids."""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import datetime, timedelta, timezone

_REQUEST_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def format_ms(ms: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ``: string order is time order."""
    dt = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)
    # strftime's %Y does not pad years before 1000 on every platform
    return f"{dt.year:04d}-{dt:%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def parse_time(value: str) -> int:
    """A request time to epoch milliseconds; ValueError when it is not ``...THH:MM:SS[.f]Z``."""
    if not _REQUEST_TIME.match(value):
        raise ValueError("must be YYYY-MM-DDTHH:MM:SS[.fraction]Z")
    whole, _, frac = value[:-1].partition(".")
    try:
        dt = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        raise ValueError("is not a valid date and time") from None
    millis = int((frac + "000")[:3]) if frac else 0
    return int(dt.timestamp()) * 1000 + millis


def compact_stamp(ms: int) -> str:
    """``YYYYMMDD_HHmmss`` for backup file names."""
    return datetime.fromtimestamp(ms // 1000, tz=timezone.utc).strftime("%Y%m%d_%H%M%S")


def request_id() -> str:
    return "req-" + os.urandom(8).hex()


class _OrderedIds:
    """Ids that sort by creation time, strictly increasing within this process.

    Layout after the prefix: 12 hex of milliseconds, 6 hex of a per-millisecond sequence,
    8 random hex (so two processes in one millisecond do not collide).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = 0
        self._seq = 0

    def next(self, prefix: str, at_ms: int | None = None) -> str:
        with self._lock:
            ms = now_ms() if at_ms is None else at_ms
            if ms <= self._last_ms:
                ms, self._seq = self._last_ms, self._seq + 1
            else:
                self._last_ms, self._seq = ms, 0
            return f"{prefix}{ms:012x}{self._seq:06x}{os.urandom(4).hex()}"


_ids = _OrderedIds()


def ordered_id(prefix: str) -> str:
    return _ids.next(prefix)
