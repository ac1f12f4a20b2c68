"""The S3 Vectors metadata filter: which filters the grammar allows, and whether a vector's metadata
satisfies one.

The grammar: ``$eq $ne $gt $gte $lt $lte $in $nin $exists $and $or``; a bare value is ``$eq``,
several keys are ``$and``; ``$eq`` on a list value matches any element; a boolean is never a number;
a filter on a non-filterable key is a ValidationException."""

from __future__ import annotations

from typing import Any

from .service import invalid

_COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")


def _primitive(value: Any) -> bool:
    return isinstance(value, (str, bool, int, float))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _values(metadata: dict[str, Any], field: str) -> list[Any]:
    value = metadata.get(field)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _condition(field: str, operator: str, operand: Any, metadata: dict[str, Any]) -> bool:
    values = _values(metadata, field)
    if operator == "$eq":
        return any(_same(v, operand) for v in values)
    if operator == "$ne":
        return not any(_same(v, operand) for v in values)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        numbers = [v for v in values if _number(v)]
        if operator == "$gt":
            return any(v > operand for v in numbers)
        if operator == "$gte":
            return any(v >= operand for v in numbers)
        if operator == "$lt":
            return any(v < operand for v in numbers)
        return any(v <= operand for v in numbers)
    if operator == "$in":
        return any(_same(v, o) for v in values for o in operand)
    if operator == "$nin":
        return not any(_same(v, o) for v in values for o in operand)
    return (field in metadata) == bool(operand)  # $exists


def _validate_operand(operator: str, operand: Any) -> None:
    if operator not in _COMPARISONS:
        raise invalid(f"Invalid query filter: unsupported operator {operator}")
    if operator in ("$eq", "$ne") and not _primitive(operand):
        raise invalid(f"Invalid query filter: {operator} takes a string, number or boolean")
    if operator in ("$gt", "$gte", "$lt", "$lte") and not _number(operand):
        raise invalid(f"Invalid query filter: {operator} takes a number")
    if operator in ("$in", "$nin") and (
        not isinstance(operand, list) or not operand or not all(_primitive(o) for o in operand)
    ):
        raise invalid(f"Invalid query filter: {operator} takes a non-empty array of primitives")
    if operator == "$exists" and not isinstance(operand, bool):
        raise invalid("Invalid query filter: $exists takes a boolean")


def validate_filter(node: Any, hidden: set[str]) -> None:
    """Refuse a filter the grammar does not allow (ValidationException)."""
    if not isinstance(node, dict) or not node:
        raise invalid("Invalid query filter: a filter must be a non-empty JSON object")
    for name, value in node.items():
        if name in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise invalid(f"Invalid query filter: {name} takes a non-empty array of filters")
            for inner in value:
                validate_filter(inner, hidden)
        elif name.startswith("$"):
            raise invalid(f"Invalid query filter: unsupported operator {name}")
        else:
            if name in hidden:
                raise invalid(f"Invalid query filter: metadata key '{name}' is not filterable")
            operators = value if isinstance(value, dict) else {"$eq": value}
            if not operators:
                raise invalid(f"Invalid query filter: no condition for '{name}'")
            for operator, operand in operators.items():
                _validate_operand(operator, operand)


def matches(node: dict[str, Any], metadata: dict[str, Any]) -> bool:
    """Whether a vector's metadata satisfies a (validated) filter."""
    for name, value in node.items():
        if name == "$and":
            if not all(matches(inner, metadata) for inner in value):
                return False
        elif name == "$or":
            if not any(matches(inner, metadata) for inner in value):
                return False
        else:
            operators = value if isinstance(value, dict) else {"$eq": value}
            if not all(_condition(name, op, operand, metadata) for op, operand in operators.items()):
                return False
    return True
