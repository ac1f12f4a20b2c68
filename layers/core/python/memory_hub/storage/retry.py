"""The one retry policy of the application's own loops.

botocore retries transport errors and throttling itself (standard mode, ``aws.CONFIG``). What it
cannot retry are our optimistic-concurrency outcomes: a compare-and-swap lost to another writer, a
transaction cancelled by a conflicting one, a memory cleared between a read and a write. Every such
loop in the code is ``for _ in attempts(): …`` — jittered exponential backoff up to a deadline,
then ``Busy`` (an answer the client may retry)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

from .errors import Busy

DEADLINE_S = 20.0  # below API Gateway's 29 s, with room for the answer
FIRST_PAUSE_S = 0.002
LONGEST_PAUSE_S = 0.1


def attempts(what: str = "storage", *, deadline_s: float = DEADLINE_S) -> Iterator[int]:
    """Yield 0, 1, 2, … pausing between attempts; raise Busy once ``deadline_s`` has passed."""
    deadline = time.monotonic() + deadline_s
    attempt = 0
    while True:
        yield attempt
        attempt += 1
        if time.monotonic() >= deadline:
            raise Busy(f"{what}: too many concurrent changes, try again")
        time.sleep(random.uniform(0, min(LONGEST_PAUSE_S, FIRST_PAUSE_S * 2 ** min(attempt, 10))))
