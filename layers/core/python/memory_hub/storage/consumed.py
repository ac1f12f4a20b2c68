"""Every DynamoDB request the service makes asks what it consumed, and the answer is added to the
request's usage (``observability``), which its metrics report.

Why: on-demand DynamoDB bills read and write request units, so a route's cost is its units; asking
``ReturnConsumedCapacity`` costs nothing and makes each request's units a CloudWatch metric on the
deployed stack (and the same numbers on the local one, whose DynamoDB counts as AWS does). One pair
of botocore event handlers on the process's one DynamoDB client covers PynamoDB and this
package's own calls alike: PynamoDB sends through that client (``models.OneClient``)."""

from __future__ import annotations

from typing import Any

from .. import observability

MODE = "TOTAL"  # the request's whole units per table; INDEXES would add each index's share
READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "ExecuteStatement"})


def install(client: Any) -> None:
    """Ask and count on ``client`` (a botocore DynamoDB client)."""
    client.meta.events.register("before-parameter-build.dynamodb", ask)
    client.meta.events.register("after-call.dynamodb", count)


def ask(params: dict[str, Any], model: Any, **_: Any) -> None:
    """Ask for consumed capacity on every operation that can answer it, unless the caller chose."""
    if "ReturnConsumedCapacity" in model.input_shape.members:
        params.setdefault("ReturnConsumedCapacity", MODE)


def count(parsed: dict[str, Any], model: Any, **_: Any) -> None:
    """Add what an answer says it consumed to the current request's usage."""
    read, write = units(parsed.get("ConsumedCapacity"), model.name)
    if read or write:
        observability.add_capacity(read, write)


def units(consumed: Any, operation: str) -> tuple[float, float]:
    """(read units, write units) of a ``ConsumedCapacity`` answer: one element or one per table.
    An element without the split (older answers) counts as the operation's kind."""
    read = write = 0.0
    for element in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
        if "ReadCapacityUnits" in element or "WriteCapacityUnits" in element:
            read += float(element.get("ReadCapacityUnits", 0.0))
            write += float(element.get("WriteCapacityUnits", 0.0))
        elif operation in READS:
            read += float(element.get("CapacityUnits", 0.0))
        else:
            write += float(element.get("CapacityUnits", 0.0))
    return read, write
