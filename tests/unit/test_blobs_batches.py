"""``blobs.delete_many`` splits its keys into DeleteObjects requests of at most 1,000 keys (AWS's
limit); it moved here from tests/api/test_clear.py, since the API tier cannot call storage code."""

from __future__ import annotations

import uuid


def test_delete_many_splits_into_batches_of_1000(aws):
    from memory_hub.storage import aws as clients
    from memory_hub.storage import blobs

    base = f"profiles/chunk{uuid.uuid4().hex}/"
    keys = [f"{base}{n:05d}" for n in range(2300)]  # deleting a missing key succeeds, as on S3
    seen = []

    def hook(params, **_):
        seen.append(len(params["Delete"]["Objects"]))

    client = clients.s3()
    client.meta.events.register("before-parameter-build.s3.DeleteObjects", hook)
    try:
        assert blobs.delete_many(keys) == 2300
    finally:
        client.meta.events.unregister("before-parameter-build.s3.DeleteObjects", hook)
    assert sorted(seen) == [300, 1000, 1000]


def test_delete_many_deletes_what_it_lists_in_batches(aws):
    from memory_hub.settings import get_settings
    from memory_hub.storage import aws as clients
    from memory_hub.storage import blobs

    base = f"profiles/many{uuid.uuid4().hex}/"
    client = clients.s3()
    for n in range(1005):
        client.put_object(Bucket=get_settings().bucket, Key=f"{base}{n:05d}", Body=b"x")
    listed = [o for page in blobs.listing(base) for o in page]
    assert len(listed) == 1005
    assert blobs.delete_many([o.key for o in listed], [o.etag for o in listed]) == 1005
    assert blobs.keys_under(base) == []
