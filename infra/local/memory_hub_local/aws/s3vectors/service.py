"""moto's S3 Vectors service as the patches reach it: its backend, and errors it sends as AWS does."""

from __future__ import annotations

import json
from typing import Any


def error(code: str, message: str, status: int) -> Any:
    """An S3 Vectors error as the service sends it (rest-json): for injected faults and refusals."""
    from ..shapes import Refusal

    body = json.dumps({"message": message}).encode()
    return Refusal(status, body, "application/json", {"x-amzn-ErrorType": code}, code)


def backend() -> Any:
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.s3vectors.models import s3vectors_backends

    return s3vectors_backends[DEFAULT_ACCOUNT_ID]["aws"]


_ERRORS: dict[str, type[Exception]] = {}


def service_error(code: str, message: str) -> Exception:
    """An error moto serialises as S3 Vectors does (status from the service model, by its code)."""
    from moto.core.exceptions import ServiceException

    if code not in _ERRORS:
        # moto finds the service of an error by the module that defines its class
        _ERRORS[code] = type(code, (ServiceException,), {"code": code, "__module__": "moto.s3vectors.exceptions"})
    return _ERRORS[code](message)


def invalid(message: str) -> Exception:
    return service_error("ValidationException", message)
