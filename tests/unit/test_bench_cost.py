"""The bench's cost section (infra/bench/memory_hub_bench/cost.py): a request's call log becomes
units per service, and units become dollars at the list prices of prices.py."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_hub_bench import bm25, cost, cost_cases, cost_print, datasets, prices
from memory_hub_bench.cases import memory_id_for


def test_a_requests_calls_are_tallied_by_service_and_price_class():
    row = cost.RouteCost("/v3/x")
    call_log = [
        [
            {"service": "dynamodb", "operation": "TransactWriteItems",
             "capacity": [{"TableName": "a", "WriteCapacityUnits": 6.0},
                          {"TableName": "b", "WriteCapacityUnits": 2.0}]},
            {"service": "dynamodb", "operation": "Query", "capacity": [{"TableName": "a", "ReadCapacityUnits": 0.5}]},
            {"service": "s3", "operation": "PutObject"},
            {"service": "s3", "operation": "GetObject"},
            {"service": "s3", "operation": "DeleteObjects"},  # free
            {"service": "s3vectors", "operation": "PutVectors"},
            {"service": "bedrock", "operation": "InvokeModel"},
            {"service": "sqs", "operation": "SendMessage"},
        ],
        [{"service": "dynamodb", "operation": "GetItem", "capacity": [{"TableName": "a", "ReadCapacityUnits": 1.5}]}],
    ]  # fmt: skip
    cost._tally(row, call_log, chars=400)
    assert (row.wru, row.rru) == (4.0, 1.0)  # the mean of the two requests
    assert (row.s3_put, row.s3_get, row.vector_puts, row.queued) == (0.5, 0.5, 0.5, 0.5)
    assert row.lambda_requests == 1.5 and row.tokens == 100 and row.calls["dynamodb"] == 1.5


def test_dollars_follow_the_list_prices():
    row = cost.RouteCost("/v3/x", wru=20, rru=2, vector_puts=1, vector_queries=1, cpu_ms=40, round_trips=3)
    usd = row.dollars(index_vectors=0)
    assert usd["DynamoDB"] == pytest.approx((20 * 0.625 + 2 * 0.125) / 1e6)
    assert usd["S3 Vectors"] == pytest.approx(128 / 1024**2 * prices.S3_VECTORS_PUT.usd + 2.5 / 1e6)
    assert row.billed_ms == 70  # CPU + 3 round trips of 10 ms
    assert usd["Lambda"] == pytest.approx(0.2 / 1e6 + 0.070 * 0.5 * prices.LAMBDA_ARM_GB_S.usd)
    assert usd["API Gateway"] == pytest.approx(3.5 / 1e6)


def test_a_query_over_a_larger_index_processes_more_data():
    # 60x the vectors, past the first 100,000 at half the price a TB: ~30x the charge
    assert cost.query_tb(6_000_000) == pytest.approx(30.5 * cost.query_tb(100_000))


def test_a_batch_puts_once_per_group_of_users_it_reaches():
    # one group: the whole batch in one PutVectors; many groups: up to one PutVectors an add
    assert cost.puts_per_add(11.6, groups=1) == pytest.approx(1 / 11.6, rel=1e-3)
    assert cost.puts_per_add(11.6, groups=16) == pytest.approx(16 * (1 - math.exp(-11.6 / 16)) / 11.6)
    assert 1 / 11.6 < cost.puts_per_add(11.6, groups=16) < cost.puts_per_add(11.6, groups=256) < 1


def test_a_search_at_6_million_is_priced_at_its_users_group_index():
    assert cost.GROUP_INDEX == cost.LARGE_INDEX // cost.GROUPS == 46_875
    search = cost.RouteCost("/v3/conversation/search", vector_queries=2)
    grouped = sum(search.dollars(cost.GROUP_INDEX).values())
    whole = sum(search.dollars(cost.LARGE_INDEX).values())
    assert whole > 5 * grouped  # one index for every user would process 128x the data


def test_the_month_prices_its_searches_as_its_users_make_them():
    add = cost.RouteCost(cost.ONE_MESSAGE_ADD, wru=21, vector_puts=1)
    with_records = cost.RouteCost(cost.SEARCH, rru=20, vector_queries=2)
    turns_only = cost.RouteCost(cost.TURNS_SEARCH, rru=12, vector_queries=1)
    result = cost.report([add, with_records, turns_only], stored=3000.0)
    assert result["month"]["search"] == cost.TURNS_SEARCH
    assert result["month"]["total"] == pytest.approx(cost.month(add, turns_only, 3000.0).total)
    assert result["month"]["with_records"] == pytest.approx(cost.month(add, with_records, 3000.0).total)
    assert result["month"]["with_records"] > result["month"]["total"]
    # a record of before, without the turns-only row, priced its searches with records
    assert cost.report([add, with_records], stored=3000.0)["month"]["search"] == cost.SEARCH
    said: list[str] = []
    cost_print.render(result, said.append)
    assert any("with formation on" in line for line in said)


def test_the_report_prices_the_months_search_for_each_choice_of_groups():
    add = cost.RouteCost(cost.ONE_MESSAGE_ADD, wru=21, vector_puts=1)
    search = cost.RouteCost(cost.SEARCH, rru=12, vector_queries=1)
    prices_by_groups = cost.report([add, search], stored=3000.0)["search_by_groups"]
    assert list(prices_by_groups) == [str(g) for g in cost.GROUP_CHOICES]
    assert sorted(prices_by_groups.values(), reverse=True) == list(prices_by_groups.values())  # more groups, less


def test_a_longer_batching_window_puts_fewer_vectors_an_add_and_a_batch_ends_at_the_queues_size():
    assert cost.workload_batch(60) == pytest.approx(500_000 / (30 * 86_400) * 60)
    assert cost.workload_batch(100_000) == cost.BATCH_SIZE  # a batch ends at 100 messages whatever the window
    assert cost.drained_batch(60) == pytest.approx(500_000 / (30 * 86_400) * 3600)
    assert cost.drained_batch(100_000) == cost.DRAIN_ROUND  # a drain's round ends at 1,000
    puts, lambdas, queued, trips = cost._batch_shares(cost.drained_batch())
    batched = cost.RouteCost(
        cost.BATCHED_ADD,
        calls={"dynamodb": 3, "s3vectors": puts},
        wru=19,
        vector_puts=puts,
        lambda_requests=lambdas,
        queued=queued,
        round_trips=2 + trips,
    )
    same = cost.rebatched(batched, cost.drained_batch(), drained=True)  # priced at the default: unchanged
    assert same.calls == batched.calls and same.round_trips == pytest.approx(batched.round_trips)
    assert same.dollars(cost.SMALL_INDEX) == pytest.approx(batched.dollars(cost.SMALL_INDEX))
    shorter = cost.rebatched(batched, cost.workload_batch(300), drained=False)  # the event source's longest
    assert shorter.vector_puts == pytest.approx(cost.puts_per_add(cost.workload_batch(300)))
    assert batched.vector_puts < 0.2 < 0.7 < shorter.vector_puts  # 128 groups: an hour shares, 300 s hardly
    assert batched.lambda_requests < shorter.lambda_requests
    # a drain receives and deletes itself (10 messages a call) and waits out its last receive (1 s)
    extra = cost._batch_shares(50, drained=True)[3] - cost._batch_shares(50, drained=False)[3]
    assert extra == pytest.approx((100 + 2 * 5) / 50)
    add = cost.RouteCost(cost.ONE_MESSAGE_ADD, wru=19, vector_puts=1)
    search = cost.RouteCost(cost.SEARCH, rru=12, vector_queries=1)
    by_window = cost.report([add, search, batched], stored=3000.0)["batched_add_by_window"]
    windows = [f"{m} min" for m in cost.DRAIN_CHOICES] + [f"{w} s" for w in cost.WINDOW_CHOICES]
    assert list(by_window) == windows
    dollars = {name: usd for name, (_, _, usd) in by_window.items()}
    assert dollars["60 min"] < dollars["30 min"] < dollars["15 min"] < dollars["300 s"] < dollars["60 s"]
    assert dollars["60 s"] - dollars["60 min"] > 10  # $ per 1M
    said: list[str] = []
    cost_print.render(cost.report([add, search, batched], stored=3000.0, adds_per_put=6.0), said.append)
    assert any("by `VectorDrainMinutes`" in line and "60 min (694.4; 0.18)" in line for line in said)
    assert any("60 minutes between drains" in line for line in said)
    assert cost.report([add, search], stored=3000.0)["batched_add_by_window"] is None
    record = cost.RouteCost(cost.BATCHED_RECORD_ADD, wru=16, vector_puts=puts, lambda_requests=lambdas, queued=queued)
    both = cost.report([add, search, batched, record], stored=3000.0, adds_per_put=6.0)
    assert list(both["batched_record_add_by_window"]) == windows
    said = []
    cost_print.render(both, said.append)
    assert any("`/v3/atomic/add`, the same way" in line for line in said)


_WORDS = st.sampled_from(["tea", "mountain", "river", "lisbon", "museum", "pastry", "hotel", "morning", "the", "city"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_WORDS, min_size=1, max_size=8).map(" ".join), min_size=1, max_size=30))
def test_typical_texts_hold_the_median_number_of_stems_nearest_the_median_length_first(texts):
    chosen = datasets.typical(texts)
    stems = sorted(len(set(bm25.stemmed(t))) for t in texts)
    lengths = sorted(len(t.encode()) for t in texts)
    middle_stems, middle_bytes = stems[len(stems) // 2], lengths[len(lengths) // 2]
    assert chosen and len(chosen) == len(set(chosen))  # distinct: a record of a held one's text reinforces it
    assert {len(set(bm25.stemmed(t))) for t in chosen} == {middle_stems}
    assert set(chosen) == {t for t in texts if len(set(bm25.stemmed(t))) == middle_stems}
    distances = [abs(len(t.encode()) - middle_bytes) for t in chosen]
    assert distances == sorted(distances)


def test_typical_texts_keep_to_their_byte_range_and_say_when_none_is_in_it():
    assert datasets.typical(["a b c", "tea garden river museum"], low=10) == ["tea garden river museum"]
    with pytest.raises(ValueError, match="no text of 100 to 200 bytes"):
        datasets.typical(["tea"], 100, 200)


def test_the_cost_sections_turn_and_records_are_the_labels_real_text():
    """The rows' labels say 200 B and 86 B: the typical LoCoMo turn and observations are that size,
    and hold the many distinct terms real text does (the workload's own texts hold a few)."""
    turn, records = datasets.typical_turn_and_records()
    assert abs(len(turn.encode()) - 200) <= 2 and len(set(bm25.stemmed(turn))) >= 15
    assert len(records) >= 200 and abs(len(records[0].encode()) - 86) <= 1
    assert len({len(set(bm25.stemmed(r))) for r in records}) == 1 and len(set(bm25.stemmed(records[0]))) >= 8


def test_the_months_user_is_the_locomo_conversation_nearest_its_600_turns():
    user = datasets.user_like(cost.ADDS * cost.MONTHS_KEPT)
    sizes = sorted(abs(len(c.turns) - 600) for c in datasets.load_locomo().corpora)
    assert (user.name, len(user.turns)) == ("conv-42", 629) and abs(len(user.turns) - 600) == sizes[0]
    assert len(user.questions) >= 2 * 15 + 2  # a full run's searches each ask another question


def test_an_erasures_units_are_shared_by_the_items_it_erases():
    add = cost.RouteCost(cost.ONE_MESSAGE_ADD, wru=12, vector_puts=1)
    search = cost.RouteCost(cost.SEARCH, rru=12, vector_queries=1)
    one = cost.RouteCost(cost_cases.ONE_MESSAGE_DELETE, wru=14.0)
    clear = cost.RouteCost(cost_cases.MEMORY_CLEAR, wru=2_060.0)
    user = cost.RouteCost(cost_cases.USER_DELETE, wru=4_300.0)
    result = cost.report([add, search, one, clear, user], stored=900.0)
    per_item = result["erasure_per_item"]
    assert per_item == {cost_cases.ONE_MESSAGE_DELETE: 14.0, cost_cases.MEMORY_CLEAR: 2.06, cost_cases.USER_DELETE: 4.3}
    said: list[str] = []
    cost_print.render(result, said.append)
    line = next(line for line in said if line.startswith("Erasure, DynamoDB write units a stored item"))
    assert f"`{cost_cases.MEMORY_CLEAR}` 2.1" in line and "one item alone bears it all" in line


def test_the_held_erasures_fill_a_memory_before_each_request_and_erase_it_whole():
    posted: list[tuple[str, dict]] = []

    class Recording:
        def post(self, path: str, body: dict) -> tuple[float, dict]:
            posted.append((path, body))
            return 1.0, {}

    (clear_label, clear), (user_label, user) = cost_cases.held_erasures(Recording(), "a typical turn")
    assert (clear_label, user_label) == (cost_cases.MEMORY_CLEAR, cost_cases.USER_DELETE)
    clear.before(0)
    adds = [body for path, body in posted if path == "/v3/conversation/add"]
    assert sum(len(body["messages"]) for body in adds) == cost_cases.HELD_MESSAGES
    assert clear.body(0) == {"memory_ids": [memory_id_for(adds[0]["team_id"], adds[0]["agent_id"])]}
    user.before(0)
    erased = user.body(0)
    assert erased["user_id"] == posted[-1][1]["user_id"] and set(erased) == {"memory_id", "user_id"}
