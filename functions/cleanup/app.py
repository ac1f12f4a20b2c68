"""CleanupFunction: the scheduled retention cleanup, run by EventBridge (daily by default).

The event may carry ``"now": "YYYY-MM-DDTHH:MM:SSZ"`` to run against another clock (tests,
backfills) and ``"budget_s"`` to stop earlier than the function's timeout (a cursor keeps the place);
a scheduled event's own ``time`` is not used, so a late retry prunes by the real clock.

``{"imports_left_running": true}`` does only one thing: every import still queued or running is
taken as stopped and undone (nothing of it was ever visible). The local stack sends it when it
starts again over its data, when no process is left that could be running an import."""

from typing import Any

from memory_hub.clock import parse_ms, request_id
from memory_hub.domain import assets, cleanup
from memory_hub.observability import logger
from memory_hub.settings import get_settings

get_settings()  # a missing setting fails the cold start, naming the variable
assets.read_only()  # this function's role only reads AssetsTable (legacy assets are read in place)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    logger.set_correlation_id(request_id())
    event = event if isinstance(event, dict) else {}
    if event.get("imports_left_running") is True:
        return cleanup.imports_left_running()
    now, budget = event.get("now"), event.get("budget_s")

    def remaining_ms() -> int:
        left: int = context.get_remaining_time_in_millis()
        return min(left, int(budget * 1000)) if isinstance(budget, int | float) and budget >= 0 else left

    report = cleanup.run(remaining_ms, parse_ms(now) if isinstance(now, str) else None)
    logger.info("cleanup", extra={k: v for k, v in report.items() if k != "audit_ids"})
    return report
