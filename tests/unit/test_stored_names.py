"""Readable names in Python, the short names on disk: the attributes an item writes many times
(postings, counters, the index format) keep the stored names they have always had (``attr_name``),
so items written before and after read the same."""

from __future__ import annotations

import uuid

from memory_hub.settings import get_settings
from memory_hub.storage import aws as clients
from memory_hub.storage.models import Counter, Message, Posting


def _stored(pk: str, sk: str) -> dict[str, object]:
    item = clients.dynamodb().get_item(
        TableName=get_settings().items_table, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
    )["Item"]
    return {name: next(iter(value.values())) for name, value in item.items()}


def test_a_posting_and_a_counter_are_stored_under_their_short_names(aws):
    pk = f"UNIT#{uuid.uuid4().hex}"
    Posting(
        pk,
        "p-item",
        lsi3="term",
        term_frequency=2,
        item_length=7,
        timestamp=1700,
        session_digest="sess",
        record_type="fact",
        task_digest="task",
    ).save()
    Posting(pk, "df-term", lsi3="term-df", document_frequency=3).save()
    Counter(pk, "counter", item_count=4, token_count=40).save()
    assert _stored(pk, "p-item") == {
        "pk": pk,
        "sk": "p-item",
        "lsi3": "term",
        "tf": "2",
        "dl": "7",
        "ts": "1700",
        "sd": "sess",
        "ty": "fact",
        "tk": "task",
    }
    assert _stored(pk, "df-term") == {"pk": pk, "sk": "df-term", "lsi3": "term-df", "n": "3"}
    assert _stored(pk, "counter") == {"pk": pk, "sk": "counter", "n": "4", "tl": "40"}


def test_an_item_stored_under_the_short_names_reads_back_by_the_readable_ones(aws):
    pk = f"UNIT#{uuid.uuid4().hex}"
    table = get_settings().items_table
    for sk, attributes in [
        (
            "p-old",
            {
                "lsi3": {"S": "term"},
                "tf": {"N": "5"},
                "dl": {"N": "9"},
                "ts": {"N": "12"},
                "sd": {"S": "s"},
                "tk": {"S": "t"},
            },
        ),
        ("counter", {"n": {"N": "6"}, "tl": {"N": "60"}}),
    ]:
        clients.dynamodb().put_item(TableName=table, Item={"pk": {"S": pk}, "sk": {"S": sk}, **attributes})
    posting = Posting.get(pk, "p-old", consistent_read=True)
    assert (posting.term_frequency, posting.item_length, posting.timestamp) == (5, 9, 12)
    assert (posting.session_digest, posting.task_digest, posting.record_type) == ("s", "t", None)
    counter = Counter.get(pk, "counter", consistent_read=True)
    assert (counter.item_count, counter.token_count) == (6, 60)
    assert Message.index_format.attr_name == "ix"
