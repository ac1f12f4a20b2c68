"""Reading an S3 Vectors request as the service reads it: moto's REST JSON parser converts what it
is given (``float("0.5")``, ``int(1.5)``, ``float(True)``) and reads a body that is not JSON as
``{"message": body}``; S3 Vectors refuses all of those with a ValidationException. ``Strict`` is
moto's parser with JSON's types held to the operation's shapes, and a required member missing
named as AWS names it.

Imported by ``patches.readable_bodies`` only: importing it imports moto."""

from __future__ import annotations

import json
from typing import Any

from moto.core.parse import UNDEFINED, RestJSONParser


class Unreadable(ValueError):
    """What makes a body not the operation's input, in words for the caller."""


def _no_constant(name: str) -> Any:
    raise Unreadable(f"The request body is not valid JSON: {name} is not a JSON value")


class Strict(RestJSONParser):
    def _parse_body_as_json(self, body_contents: Any) -> Any:
        if not body_contents:
            return {}
        try:  # UTF-8: the server refuses another body before moto decodes it
            text = body_contents.decode("utf-8") if isinstance(body_contents, bytes) else body_contents
            parsed = json.loads(text, parse_constant=_no_constant)
        except Unreadable:
            raise
        except ValueError:
            raise Unreadable("The request body is not valid JSON") from None
        if not isinstance(parsed, dict):
            raise Unreadable("The request body must be a JSON object")
        return parsed

    def _parse_structure(self, shape: Any, value: Any) -> Any:
        if value is None or shape.is_document_type:
            return super()._parse_structure(shape, value)  # type: ignore[no-untyped-call]
        if not isinstance(value, dict):
            raise Unreadable(f"Expected an object for {shape.name}")
        parsed = super()._parse_structure(shape, value)  # type: ignore[no-untyped-call]
        for name in shape.required_members:
            body_member = "location" not in shape.members[name].serialization  # a URI's is parsed apart
            if body_member and value.get(shape.members[name].serialization.get("name", name)) is None:
                raise Unreadable(
                    f"1 validation error detected: Value null at '{name}' failed to satisfy constraint: "
                    "Member must not be null"
                )
        return parsed

    def _parse_list(self, shape: Any, node: Any) -> Any:
        if not isinstance(node, list):
            raise Unreadable(f"Expected a list for {shape.name}")
        return super()._parse_list(shape, node)  # type: ignore[no-untyped-call]

    def _parse_map(self, shape: Any, value: Any) -> Any:
        if not isinstance(value, dict):
            raise Unreadable(f"Expected an object for {shape.name}")
        return super()._parse_map(shape, value)  # type: ignore[no-untyped-call]

    def _parse_string(self, shape: Any, value: Any) -> Any:
        if value is not UNDEFINED and not isinstance(value, str):
            raise Unreadable(f"Expected a string for {shape.name}")
        return super()._parse_string(shape, value)  # type: ignore[no-untyped-call]

    def _parse_float(self, shape: Any, value: Any) -> Any:
        if value is UNDEFINED:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Unreadable(f"Expected a number for {shape.name}")
        return float(value)

    _parse_double = _parse_float

    def _parse_integer(self, shape: Any, value: Any) -> Any:
        if value is UNDEFINED:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise Unreadable(f"Expected an integer for {shape.name}")
        return value

    _parse_long = _parse_integer

    def _parse_boolean(self, shape: Any, value: Any) -> Any:
        if value is not UNDEFINED and not isinstance(value, bool):
            raise Unreadable(f"Expected a boolean for {shape.name}")
        return value
