"""The all-teams view of the audit log is spread over several partitions of its index (every audited
write of the stack lands in it, and one partition takes about 1,000 writes a second), in this
process over moto: new events spread over them, events of before stay in the one partition of
then, and a read of the view merges them all, newest first, page after page."""

from __future__ import annotations

import dataclasses
import uuid

from memory_hub.domain import audit as audit_route
from memory_hub.domain.principal import Principal
from memory_hub.storage import audit, layout

ADMIN = Principal("unit-admin", "admin", ("*",))


def _events(n: int, team: str) -> list:
    context = audit.EventContext(team, "unit-actor", "req-unit-audit-0001", "agent", f"{team}:agent")
    return audit.event_items([audit.NewEvent("delete", "L0", f"msg-{i}", 1) for i in range(n)], context)


def test_new_events_spread_over_the_views_partitions():
    events = _events(200, "spread")
    shards = {e.shard for e in events}
    assert shards <= set(layout.audit_all_partitions()[1:])
    assert len(shards) == layout.AUDIT_ALL_SHARDS  # 200 events over 16: every one taken
    assert all(layout.audit_all_shard(e.event_id) == e.shard for e in events)  # a function of the id alone


def test_the_view_is_read_newest_first_across_its_partitions_and_the_one_of_before(aws):
    team = f"t{uuid.uuid4().hex[:8]}"
    events = _events(45, team)
    of_before = [dataclasses.replace(e, shard=layout.AUDIT_ALL) for e in events[::5]]  # written before the shards
    stored = [e for e in events if e.event_id not in {b.event_id for b in of_before}] + of_before
    audit.put(stored)
    newest = sorted((e.event_id for e in stored), reverse=True)
    ours = [e.event_id for e in audit.of_everyone(None, None, 1000) if e.team_id == team]
    assert ours == newest
    seen: list[str] = []
    token = None
    while True:  # the admin's route, 7 a page
        page = audit_route.query(ADMIN, None, None, 7, token)
        seen += [e.event_id for e in page.events if e.team_id == team]
        token = page.next_token
        if token is None:
            break
    assert seen == newest  # each event once, in order, across pages and partitions


def test_an_action_filter_reads_the_view_across_its_partitions_too(aws):
    team = f"t{uuid.uuid4().hex[:8]}"
    context = audit.EventContext(team, "unit-actor", "req-unit-audit-0002", "agent", f"{team}:agent")
    wanted = [audit.NewEvent("scenario_rm" if i % 9 == 0 else "delete", "L0", f"msg-{i}", 1) for i in range(60)]
    events = audit.event_items(wanted, context)
    audit.put(events)
    rare = sorted((e.event_id for e in events if e.action == "scenario_rm"), reverse=True)
    found = [e.event_id for e in audit.of_everyone(None, "scenario_rm", 1000) if e.team_id == team]
    assert found == rare and len(rare) == 7


def test_newest_first_by_id_is_newest_first_by_time_whatever_the_clock_did(monkeypatch):
    """Events are listed by id; two threads of one erasure record theirs at once, and a time read
    apart from the id (before it, as it was) could stamp the later id earlier. Each event's time
    is its id's, so the order by id is the order by time, even with a clock that goes back."""
    from memory_hub import clock

    times = iter([5_000, 5_007, 5_003, 5_009, 5_001, 5_012])
    monkeypatch.setattr(clock, "now_ms", lambda: next(times))
    first, second = _events(1, "clocked"), _events(2, "clocked")
    events = sorted([*first, *second], key=lambda e: e.event_id, reverse=True)
    assert [e.at for e in events] == sorted((e.at for e in events), reverse=True)
    assert all(e.at == clock.format_ms(clock.id_ms(e.event_id)) for e in events)
