"""A policy as shown: `icelake policy TABLE` prints each value with its source."""


def test_icelake_policy_prints_each_value_with_its_source(make_lake, capsys):
    import pyarrow as pa

    from icelake_assets.catalog.connection import open_catalog
    from icelake_assets.cli import main
    from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name

    lake = make_lake(
        extra={"policies": {"namespaces": {"taxi": {"mode": "enforce", "snapshots": {"min_keep": 7}}}}}
    )
    catalog = open_catalog(lake, catalog_name(lake), create=True)
    catalog.create_namespace("taxi")
    catalog.create_table(
        "taxi.trips",
        schema=pa.schema([pa.field("id", pa.int64())]),
        properties={"icelake.manifests.max_count": "12", "icelake.orphans.older_than_hours": "3"},
    )
    assert main(["--config", lake.source, "policy", "taxi.trips"]) == 0
    out = capsys.readouterr().out
    lines = {
        line.split()[0]: line.split(None, 2)[1:] for line in out.splitlines()[3:] if line and " " in line
    }
    assert out.startswith(
        f"policy of {catalog_name(lake)}.taxi.trips: mode enforce "
        "(icelake.yaml policies.namespaces['taxi'].mode)"
    )
    assert lines["snapshots.min_keep"] == ["7", "icelake.yaml policies.namespaces['taxi'].snapshots.min_keep"]
    assert lines["snapshots.max_count"] == ["20", "icelake.yaml thresholds.snapshots.max_count"]
    assert lines["manifests.max_count"] == ["12", "table property icelake.manifests.max_count"]
    assert lines["orphans.older_than_hours"] == ["72.0", "default"]
    assert "problem: table property icelake.orphans.older_than_hours='3' ignored" in out
    assert main(["--config", lake.source, "policy", "taxi.trips", "--changed"]) == 0
    changed = capsys.readouterr().out
    keys = {line.split()[0] for line in changed.splitlines()[3:] if not line.startswith("problem:")}
    assert keys == {"mode", "snapshots.min_keep", "snapshots.max_count", "manifests.max_count"} | {
        f"{section}.{k}" for section, values in TEST_THRESHOLDS.items() for k in values
    }
