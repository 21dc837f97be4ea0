"""Metadata locations read concurrently from a real REST catalog (SeaweedFS, OAuth2 client credentials:
every worker opens its own client and fetches its own token) equal the sequential reads: a missing
table is None, a catalog that is down raises the same CatalogUnavailableError naming it."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import fields
from urllib.parse import urlsplit

import pyarrow as pa
import pytest
from pydantic import ValidationError
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from bench.health.latency_proxy import latency_proxy
from icelake_assets.catalog.connection import CatalogUnavailableError, TableMissingError, TableRef
from icelake_assets.catalog.locations import bounded_map, metadata_locations
from icelake_assets.health.stats import TableStats
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.settings.schema import AutomationSettings
from icelake_assets_tests.servers import SeaweedFS, ServerUnavailable, seaweedfs_server

KEY, SECRET = "icelake-admin", "icelake-s3cr3t-1234"
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


@pytest.fixture(scope="module")
def weed():
    try:
        with seaweedfs_server((KEY, SECRET)) as server:
            yield server
    except ServerUnavailable as err:
        pytest.skip(str(err))


def rest_catalog(server: SeaweedFS, uri: str | None = None) -> Catalog:
    return load_catalog(
        "lake",
        type="rest",
        uri=uri or server.catalog_uri,
        warehouse=server.warehouse,
        auth={
            "type": "oauth2",
            "oauth2": {"client_id": KEY, "client_secret": SECRET, "token_url": server.token_url},
        },
        **{
            "s3.endpoint": server.s3_endpoint,
            "s3.region": "us-east-1",
            "s3.access-key-id": KEY,
            "s3.secret-access-key": SECRET,
        },
    )


@pytest.fixture(scope="module")
def lake(weed):
    """Six tables: five written once or twice (their metadata moved on), one never written."""
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("AWS_")]:
            mp.delenv(key)
        mp.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
        catalog = rest_catalog(weed)
        catalog.create_namespace("shop")
        refs = []
        for i in range(6):
            table = catalog.create_table(f"shop.t{i}", SCHEMA)
            for batch in range(i % 3):
                table.append(pa.table({"id": pa.array([batch], pa.int64())}))
            refs.append(TableRef("lake", ("shop",), f"t{i}"))
        yield catalog, refs


def test_concurrent_reads_equal_sequential_reads_and_a_missing_table_is_none(lake):
    catalog, refs = lake
    wanted = [*refs, TableRef("lake", ("shop",), "gone"), TableRef("lake", ("nowhere",), "t0")]
    sequential = metadata_locations(catalog, wanted, concurrency=1)
    concurrent = metadata_locations(catalog, wanted, concurrency=4)
    assert concurrent == sequential
    assert list(concurrent) == wanted
    assert sequential[wanted[-1]] is None and sequential[wanted[-2]] is None
    # The locations are the tables' own (what a full load answers), each distinct.
    assert [sequential[r] for r in refs] == [catalog.load_table(r.identifier).metadata_location for r in refs]
    assert len({sequential[r] for r in refs}) == len(refs)


def test_a_catalog_that_is_down_names_itself_sequential_or_concurrent(weed, lake):
    _, refs = lake
    target = urlsplit(weed.catalog_uri)
    with latency_proxy(target.hostname or "127.0.0.1", target.port or 80, delay=0.0) as port:
        catalog = rest_catalog(weed, f"http://127.0.0.1:{port}")
        assert metadata_locations(catalog, refs[:2], concurrency=2)[refs[0]] is not None
    # The proxy is closed: its port refuses every connection, the pooled ones are gone.
    errors = []
    for concurrency in (1, 4):
        with pytest.raises(CatalogUnavailableError) as err:
            metadata_locations(catalog, refs, concurrency=concurrency)
        errors.append(err.value)
    for error in errors:
        assert error.catalog == "lake"
        assert str(error).startswith("catalog 'lake' failed to load table lake.shop.t0: ConnectionError")


def test_tables_loaded_ahead_by_the_sensor_give_the_same_tables_and_health(weed, lake, tmp_path, monkeypatch):
    """What the maintenance sensor does for the changed tables of a tick (sensors/prefetch.py)."""
    catalog, refs = lake
    monkeypatch.setenv("LAKE_KEY", KEY)
    monkeypatch.setenv("LAKE_SECRET", SECRET)
    path = tmp_path / "icelake.yaml"
    path.write_text(
        "\n".join(
            [
                "catalogs:",
                "  lake:",
                "    type: rest",
                f"    uri: {weed.catalog_uri}",
                f"    warehouse: {weed.warehouse}",
                f"    s3.endpoint: {weed.s3_endpoint}",
                "    s3.region: us-east-1",
                "    s3.access-key-id: ${LAKE_KEY}",
                "    s3.secret-access-key: ${LAKE_SECRET}",
                "    auth:",
                "      type: oauth2",
                "      oauth2:",
                "        client_id: ${LAKE_KEY}",
                "        client_secret: ${LAKE_SECRET}",
                f"        token_url: {weed.token_url}",
                "automation: {catalog_concurrency: 4}",
            ]
        )
        + "\n"
    )
    gone = TableRef("lake", ("shop",), "gone")
    ahead = IcelakeResource(config_path=str(path))
    ahead.prefetch_tables([*refs, gone])
    one_by_one = IcelakeResource(config_path=str(path))
    for ref in refs:
        table, expected = ahead.load_table(ref), one_by_one.load_table(ref)
        assert table.metadata == expected.metadata and table.metadata_location == expected.metadata_location
        assert _numbers(ahead.stats(table)) == _numbers(one_by_one.stats(expected))
    with pytest.raises(TableMissingError):
        ahead.load_table(gone)  # left out of the prefetch: loaded when asked, failing as before
    ahead.prefetch_tables(refs[:2])  # the loader's threads and clients serve the next chunk too
    ahead.drop_prefetched()  # the tick's end: its loaders closed, what was not asked for forgotten
    assert (
        ahead.load_table(refs[0]).metadata_location
        == catalog.load_table(refs[0].identifier).metadata_location
    )


def _numbers(stats: TableStats) -> dict[str, object]:
    """A table's statistics but those that depend on the clock (ages) or on the manifest cache."""
    return {
        f.name: getattr(stats, f.name)
        for f in fields(stats)
        if "_age_" not in f.name and f.name not in ("evaluated_at", "manifests_read")
    }


def test_the_concurrency_bound_holds_and_order_is_kept():
    running, peak, lock = 0, 0, threading.Lock()

    def work(i: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return i * i

    assert bounded_map(work, range(30), 3) == [i * i for i in range(30)]
    assert peak == 3
    peak = 0
    assert bounded_map(work, range(5), 1) == [i * i for i in range(5)]
    assert peak == 1
    with pytest.raises(ValueError):
        bounded_map(work, [1], 0)
    assert AutomationSettings().catalog_concurrency == 8
    for wrong in (0, 65):
        with pytest.raises(ValidationError):
            AutomationSettings(catalog_concurrency=wrong)
