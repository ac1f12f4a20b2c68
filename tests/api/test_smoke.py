def test_write_then_read_round_trip(api, scope):
    written = api.post("/v3/scenario/write", scope.body(path="notes/a.md", content="hello"))
    assert written.status == 200, written.body
    assert written.data["version"] == 1
    read = api.post("/v3/scenario/read", scope.body(path="notes/a.md"))
    assert read.data["content"].endswith("\n\nhello")
    assert read.data["version"] == 1
