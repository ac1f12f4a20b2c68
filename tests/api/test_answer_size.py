"""Pages whose items are at the contract's limits stop short of Lambda's 6 MB answer: the local
stack refuses a function's answer past it as AWS does (a 502), so a page of long scenario
summaries or of assets at their limits would fail there. Such a page carries fewer items and a
next_token for the rest (total still counts every match)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from helpers import make_scope

EMOJI = "\U0001f600"  # four bytes in UTF-8


def _assert_ok(answer) -> dict:
    assert answer.status == 200, (answer.status, str(answer.body)[:300])
    return answer.data


def test_memory_list_of_assets_at_their_limits_pages_within_the_answer(api):
    team = make_scope().team_id
    acl = [{"principal": f"{n:03}" + EMOJI * 253, "permissions": ["read", "write", "admin"]} for n in range(100)]
    bindings = [{"agent_id": f"a{n:03}".ljust(64, "x"), "injection_mode": EMOJI * 64} for n in range(100)]

    def create(n: int) -> None:
        body = {"team_id": team, "agent_id": f"agent{n:03}", "name": EMOJI * 256, "acl": acl, "bindings": bindings}
        _assert_ok(api.post("/v3/memory/create", body))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(create, range(100)))
    seen: list[str] = []
    token = None
    for _ in range(100):
        page = _assert_ok(api.post("/v3/memory/list", {"team_id": team, "limit": 100, "next_token": token}))
        seen += [item["agent_id"] for item in page["items"]]
        token = page.get("next_token")
        if token is None:
            break
    assert seen == [f"agent{n:03}" for n in range(100)]
    assert len(_assert_ok(api.post("/v3/memory/list", {"team_id": team, "limit": 100}))["items"]) < 100


def test_scenario_ls_of_long_summaries_pages_within_the_answer(api):
    scope = make_scope()
    paths = [f"{n:04}/" + "p" * 490 + ".md" for n in range(700)]

    def write(path: str) -> None:
        _assert_ok(api.post("/v3/scenario/write", scope.body(path=path, content="x", summary=EMOJI * 1024)))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, paths))
    first = _assert_ok(api.post("/v3/scenario/ls", scope.body()))  # the default limit, 1000: as SDKs ask
    assert first["total"] == 700 and first["entries"] == first["scenes"] and first.get("next_token")
    rest = _assert_ok(api.post("/v3/scenario/ls", scope.body(next_token=first["next_token"])))
    assert [e["path"] for e in first["entries"] + rest["entries"]] == paths and "next_token" not in rest
