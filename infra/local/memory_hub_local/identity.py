"""Each function's own credentials (Lambda gives each function its role's): the emulated AWS side
knows a function by the access key it signs with, and holds it to that function's IAM policy."""

from __future__ import annotations

import hashlib

SECRET = "local-secret-access-key"  # noqa: S105 - the emulator checks no signature


def access_key_of(logical_id: str) -> str:
    return "ASIA" + hashlib.sha256(logical_id.encode()).hexdigest()[:16].upper()


def session_token_of(logical_id: str) -> str:
    return "local-session-" + hashlib.sha256(b"token:" + logical_id.encode()).hexdigest()[:24]
