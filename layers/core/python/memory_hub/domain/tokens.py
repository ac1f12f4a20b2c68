"""Opaque, signed pagination tokens bound to the filters they were issued for (``limit`` may
change; anything else is ``next_token: invalid``)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from ..storage.secrets import token_secret
from .errors import Invalid

INVALID = "next_token: invalid"
_SIGNATURE = 16


def _sign(payload: bytes) -> bytes:
    return hmac.new(token_secret().encode(), payload, hashlib.sha256).digest()[:_SIGNATURE]


def _fingerprint(filters: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(filters, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def encode(position: Any, filters: dict[str, Any]) -> str:
    payload = json.dumps(
        {"p": position, "f": _fingerprint(filters)}, separators=(",", ":"), ensure_ascii=False
    ).encode()
    return base64.urlsafe_b64encode(payload + _sign(payload)).decode().rstrip("=")


def _payload(token: str) -> bytes:
    """What ``token`` carries, if this deployment signed it (ValueError if not)."""
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    payload, signature = raw[:-_SIGNATURE], raw[-_SIGNATURE:]
    if len(raw) <= _SIGNATURE or not hmac.compare_digest(signature, _sign(payload)):
        raise ValueError
    return payload


def signed(token: str) -> bool:
    """Whether ``token`` is one this deployment issued, for whatever filters: a request whose other
    fields are bad cannot say which filters it pages, but a forged token is named beside them."""
    try:
        _payload(token)
    except ValueError:
        return False
    return True


def decode(token: str, filters: dict[str, Any]) -> Any:
    """The position stored in ``token``; ``next_token: invalid`` if forged or for other filters."""
    try:
        data = json.loads(_payload(token))
        if data["f"] != _fingerprint(filters):
            raise ValueError
        return data["p"]
    except (ValueError, KeyError, TypeError):
        raise Invalid(INVALID) from None
