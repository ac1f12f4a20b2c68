"""The local stack's snapshot (``aws/state.py``): JSON lines written and read a record at a time —
every kind of record comes back as it was after a restart, the file is never one document, and a
snapshot of the older one-document format is still read. Each start runs in a fresh interpreter
(moto's state is per process)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

START = textwrap.dedent("""
    import base64, json, sys
    from memory_hub_local.aws import __main__ as aws
    from memory_hub_local.aws import s3vectors
    from memory_hub_local.aws.state import dynamodb_backend, s3_backend
    args = aws._arguments(["--port", "0", "--data-dir", sys.argv[1]])
    state, side = aws._aws_side(args)
    items = dynamodb_backend("us-east-1").get_table(state.names["ItemsTable"])
    bucket = state.names["MemoryBucket"]
    if sys.argv[2] == "write":
        for i in range(30):
            items.put_item({"pk": {"S": f"p{i % 3}"}, "sk": {"S": f"{i:02d}"}, "lsi1": {"S": f"t{i:02d}"},
                            "m": {"M": {"n": {"N": str(i)}, "l": {"L": [{"S": "x"}, {"BOOL": True}]}}}})
        s3_backend().put_object(bucket, "profiles/t:a/m/notes.md", b"# notes\\n")
        vectors = s3vectors.backend()
        vector_bucket = next(iter(vectors.vector_buckets.values()))
        vectors.create_index(vector_bucket.vector_bucket_name, None, "m1.e1", "float32", 3, "cosine")
        vectors.put_vectors(vector_bucket.vector_bucket_name, "m1.e1", None,
            [{"key": "k1", "data": {"float32": [0.5, -1.0, 2.0]}, "metadata": {"layer": "L0"}}])
        state.save(7)
    vector_bucket = next(iter(s3vectors.backend().vector_buckets.values()))
    index = next((i for i in vector_bucket.indexes.values() if i.index_name == "m1.e1"), None)
    print(json.dumps({
        "journal_start": state.journal_start,
        "packed": sum(i._attrs is None for i in items.all_items()),  # before anything reads them
        "items": sorted(json.dumps(i.to_json()["Attributes"], sort_keys=True) for i in items.all_items()),
        "object": s3_backend().get_object(bucket, "profiles/t:a/m/notes.md").value.decode()
            if "profiles/t:a/m/notes.md" in s3_backend().buckets[bucket].keys else None,
        "vectors": None if index is None else {k: [v.data["float32"], v.metadata] for k, v in index.vectors.items()},
        "secret": state.secret_values.get("TokenSecret"),
    }))
""")


def start(data_dir: Path, mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", START, str(data_dir), mode], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_kind_of_record_comes_back_after_a_restart_packed(tmp_path):
    written = start(tmp_path, "write")
    assert len(written["items"]) == 30 and written["vectors"] and written["object"] == "# notes\n"
    restored = start(tmp_path, "read")
    assert restored["journal_start"] == 7
    assert {k: restored[k] for k in ("items", "object", "vectors", "secret")} == {
        k: written[k] for k in ("items", "object", "vectors", "secret")
    }
    assert restored["packed"] == 30


def test_the_snapshot_is_one_record_a_line_after_its_header(tmp_path):
    start(tmp_path, "write")
    with gzip.open(tmp_path / "state.json.gz", "rt", encoding="utf-8") as handle:
        lines = [json.loads(line) for line in handle]
    header, records = lines[0], lines[1:]
    assert header["format"] == 3 and header["journal"] == 7 and "TokenSecret" in header["secrets"]
    kinds = [r["kind"] for r in records]
    assert kinds.count("item") == 30 and kinds.count("object") == 1 and kinds.count("vector") == 1
    assert kinds.index("bucket") < kinds.index("index") < kinds.index("vector")  # each after what holds it


def test_a_snapshot_of_the_one_document_format_is_still_read(tmp_path):
    written = start(tmp_path, "write")
    with gzip.open(tmp_path / "state.json.gz", "rt", encoding="utf-8") as handle:
        lines = [json.loads(line) for line in handle]
    header, records = lines[0], lines[1:]
    document: dict = {"format": 2, "journal": header["journal"], "secrets": header["secrets"], "dynamodb": {}, "s3": {}}
    buckets: list[dict] = []
    for r in records:
        kind = r.pop("kind")
        if kind == "item":
            document["dynamodb"].setdefault(r["table"], []).append(r["item"])
        elif kind == "object":
            document["s3"].setdefault(r.pop("bucket"), []).append(r)
        elif kind == "bucket":
            buckets.append({**r, "indexes": []})
        elif kind == "index":
            r.pop("arn")
            buckets[-1]["indexes"].append({**r, "vectors": []})
        else:
            r.pop("arn"), r.pop("index_arn")
            buckets[-1]["indexes"][-1]["vectors"].append(r)
    document["s3vectors"] = {"format": 1, "buckets": buckets}
    with gzip.open(tmp_path / "state.json.gz", "wt", encoding="utf-8") as out:
        json.dump(document, out, separators=(",", ":"))
    restored = start(tmp_path, "read")
    assert restored["journal_start"] == 7
    assert {k: restored[k] for k in ("items", "object", "vectors", "secret")} == {
        k: written[k] for k in ("items", "object", "vectors", "secret")
    }
