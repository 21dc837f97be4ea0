"""The health sensor's cursor: its JSON round-trips, the flat cursor of earlier versions is read as its
tables, and a report run's outcome settles what it asked for (success: reported; failure: due again;
still waiting: compared against what it asked for, so a tick does not ask twice)."""

from icelake_assets.orchestration.sensors.health_cursor import HealthCursor, RunOutcome

T = "lake.ns.days"


def test_json_round_trip_and_the_flat_cursor_of_earlier_versions():
    cursor = HealthCursor(
        tables={T: "s3://w/ns/days/metadata/00003-a.metadata.json"},
        partitions={T: {"2024-03-01": "aaaaaaaaaaaa"}},
        pending={"17": {T: {"2024-03-02": "bbbbbbbbbbbb", "2024-03-03": None}}},
        due={"lake.ns.other"},
    )
    assert HealthCursor.loads(cursor.dumps()) == cursor
    old = HealthCursor.loads('{"lake.ns.days": "s3://w/ns/days/metadata/00002-b.metadata.json"}')
    assert old.tables == {T: "s3://w/ns/days/metadata/00002-b.metadata.json"} and old.partitions == {}
    assert HealthCursor.loads("not json") == HealthCursor() == HealthCursor.loads(None)
    assert HealthCursor.loads("[1, 2]") == HealthCursor()


def test_a_pending_request_is_what_a_table_is_compared_with_until_its_run_ends():
    cursor = HealthCursor(partitions={T: {"2024-03-01": "a1", "2024-03-03": "c1"}}, due={T})
    cursor.request("100", {T: {"2024-03-02": "b1", "2024-03-03": None}})
    assert cursor.due == set()
    assert cursor.known(T) == {"2024-03-01": "a1", "2024-03-02": "b1"}  # 03-03 forgotten once reported
    cursor.request("200", {T: {"2024-03-02": "b2"}})
    assert cursor.known(T) == {"2024-03-01": "a1", "2024-03-02": "b2"}  # the later request wins

    cursor.settle({"100": RunOutcome.SUCCEEDED})  # 200 has no outcome yet: waiting
    assert cursor.partitions[T] == {"2024-03-01": "a1", "2024-03-02": "b1"} and list(cursor.pending) == [
        "200"
    ]
    assert cursor.known(T)["2024-03-02"] == "b2"

    cursor.settle({"200": RunOutcome.FAILED})  # asked again: compared with what was reported
    assert cursor.pending == {} and cursor.due == {T}
    assert cursor.known(T) == {"2024-03-01": "a1", "2024-03-02": "b1"}


def test_forget_drops_a_tables_digests():
    cursor = HealthCursor(partitions={T: {"k": "d"}}, due={T})
    cursor.forget(T)
    assert cursor.partitions == {} and cursor.due == set()
    assert '"partitions":{}' in cursor.dumps()
