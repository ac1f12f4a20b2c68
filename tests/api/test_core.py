"""L3 core persona: versions, exact storage, backups, concurrency."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from helpers import memory_files, s3_body
from memory_hub.storage import bucket

BACKUP_NAME = re.compile(r"^persona_(\d{8}_\d{6})_(\d+)\.md$")
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def write(api, scope, content):
    answer = api.post("/v3/core/write", scope.body(content=content))
    assert answer.status == 200, answer.body
    return answer.data


def read(api, scope):
    answer = api.post("/v3/core/read", scope.body())
    assert answer.status == 200, answer.body
    return answer.data


def count(api, scope):
    answer = api.post("/v3/core/count", scope.body())
    assert answer.status == 200, answer.body
    return answer.data["total"]


def objects(scope, under=""):
    """The memory's files (or those under ``under``, a name of memory_hub.storage.bucket): key -> body."""
    return {key: s3_body(key) for key in memory_files(scope, under)}


def backups(scope):
    """{version: (stamp, content)} of the persona backups, checking every name."""
    prefix = scope.prefix + bucket.PERSONA_BACKUPS
    result = {}
    for key, body in objects(scope, bucket.PERSONA_BACKUPS).items():
        match = BACKUP_NAME.match(key[len(prefix) :])
        assert match, key
        result[int(match.group(2))] = (match.group(1), body.decode("utf-8"))
    return result


def test_versions_start_at_one_and_add_one(api, scope):
    answers = [write(api, scope, f"persona {i}") for i in range(3)]
    assert [a["version"] for a in answers] == [1, 2, 3]
    assert all(TIME.match(a["updated_at"]) for a in answers)
    assert all((a["team_id"], a["agent_id"]) == (scope.team_id, scope.agent_id) for a in answers)
    got = read(api, scope)
    assert got["version"] == 3 and got["content"] == "persona 2"
    assert got["updated_at"] == answers[2]["updated_at"]
    assert TIME.match(got["created_at"]) and got["created_at"] <= got["updated_at"]


def test_created_at_stays_while_updated_at_moves(api, scope):
    write(api, scope, "a")
    first = read(api, scope)
    write(api, scope, "b")
    second = read(api, scope)
    assert second["created_at"] == first["created_at"]
    assert second["updated_at"] >= first["updated_at"]


@pytest.mark.parametrize(
    "content",
    [
        "  padded on both sides  \n\n\n",
        "\n\nleading newlines",
        "-----META-START-----\nversion: 9\n-----META-END-----\n\nno META handling here",
        "unicode ✓ 中文 😀\r\nCRLF\ttab\x00nul",
        "# Persona\n\n---\n## Scene navigation\n- [a](scene_blocks/a.md)\n",
    ],
)
def test_persona_is_stored_exactly_as_written(api, scope, content):
    write(api, scope, content)
    assert read(api, scope)["content"] == content
    stored = objects(scope, bucket.PERSONA)
    assert stored == {scope.prefix + bucket.PERSONA: content.encode("utf-8")}


def test_empty_persona_is_allowed_and_counts(api, scope):
    assert count(api, scope) == 0
    assert write(api, scope, "")["version"] == 1
    got = read(api, scope)
    assert got["content"] == "" and got["version"] == 1
    assert count(api, scope) == 1
    assert write(api, scope, "now something")["version"] == 2
    assert count(api, scope) == 1


def test_missing_persona_reads_as_all_null(api, scope):
    got = read(api, scope)
    assert (got["content"], got["version"], got["created_at"], got["updated_at"]) == (None, None, None, None)
    assert (got["team_id"], got["agent_id"]) == (scope.team_id, scope.agent_id)
    assert count(api, scope) == 0
    assert objects(scope) == {}


def test_content_bounds(api, scope):
    assert write(api, scope, "x" * 1_000_000)["version"] == 1
    for body in (scope.body(content="x" * 1_000_001), scope.body(), scope.body(content=None)):
        answer = api.post("/v3/core/write", body)
        assert answer.status == 400 and answer.message.startswith("content: "), answer.body
    assert read(api, scope)["version"] == 1


def test_five_writes_keep_the_three_newest_backups(api, scope):
    contents = [f"persona v{v}\n" for v in range(1, 6)]
    for content in contents:
        write(api, scope, content)
    kept = backups(scope)
    assert sorted(kept) == [2, 3, 4]
    now = datetime.now(UTC)
    for version, (stamp, body) in kept.items():
        assert body == contents[version - 1]  # the persona that version 'version + 1' replaced
        taken = datetime.strptime(stamp, "%Y%m%d_%H%M%S").replace(tzinfo=UTC)
        assert abs(now - taken) < timedelta(minutes=5)
    assert read(api, scope)["content"] == contents[-1]
    everything = objects(scope)
    assert len(everything) == 4  # persona.md + 3 backups, nothing else


def test_first_write_makes_no_backup_and_second_backs_up_the_first(api, scope):
    write(api, scope, "one")
    assert backups(scope) == {}
    write(api, scope, "two")
    assert {v: body for v, (_, body) in backups(scope).items()} == {1: "one"}


def test_l3_is_shared_by_users_and_isolated_between_agents(api, scope):
    write(api, scope, "the agent's persona")
    colleague = type(scope)(scope.team_id, scope.agent_id, "another-user")
    assert read(api, colleague)["content"] == "the agent's persona"
    other_agent = type(scope)(scope.team_id, scope.agent_id + "2", scope.user_id)
    assert read(api, other_agent)["content"] is None and count(api, other_agent) == 0


def test_concurrent_writes_get_distinct_versions(api, scope):
    write(api, scope, "seed")  # the asset exists; writers race on persona.md only

    def one(i):
        answer = api.post("/v3/core/write", scope.body(content=f"writer {i}"))
        assert answer.status == 200, answer.body
        return answer.data["version"], f"writer {i}"

    with ThreadPoolExecutor(max_workers=10) as pool:
        results = dict(pool.map(one, range(10)))
    assert sorted(results) == list(range(2, 12))
    got = read(api, scope)
    assert got["version"] == 11 and got["content"] == results[11]
    kept = backups(scope)
    assert sorted(kept) == [8, 9, 10]
    assert all(body == results[v] for v, (_, body) in kept.items())


def test_concurrent_first_writes_get_versions_one_to_ten(api, scope):
    def one(i):
        answer = api.post("/v3/core/write", scope.body(content=f"first {i}"))
        assert answer.status == 200, answer.body
        return answer.data["version"]

    with ThreadPoolExecutor(max_workers=10) as pool:
        versions = list(pool.map(one, range(10)))
    assert sorted(versions) == list(range(1, 11))
    assert read(api, scope)["version"] == 10
    assert count(api, scope) == 1
