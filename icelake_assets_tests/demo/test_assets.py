"""The demo's writer and consumer assets through a real Dagster instance (and real Spark)."""

import pyarrow.compute as pc
import pytest
from dagster import DagsterInstance, materialize

from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.demo.assets import build_demo_consumer, build_demo_writer
from icelake_assets.demo.lake import SCALES, build_demo_lake
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.orchestration.resources import IcebergSparkResource, IcelakeResource
from icelake_assets_tests.conftest import catalog_name


@pytest.fixture
def lake(make_lake, tmp_path):
    settings = make_lake()
    refs = {r.name: r for r in build_demo_lake(settings, catalog=catalog_name(settings), scale="test")}
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        yield settings, refs, instance


def test_the_writer_appends_micro_batches_that_create_small_files(lake):
    settings, refs, instance = lake
    trips = load_table(open_catalog(settings, catalog_name(settings)), refs["trips"])
    files = int(trips.current_snapshot().summary["total-data-files"])
    snapshots = len(trips.snapshots())
    result = materialize(
        [build_demo_writer(refs["trips"])],
        instance=instance,
        resources={"icelake": IcelakeResource(config_path=settings.source)},
        run_config={
            "ops": {"icelake_demo__trips_writer": {"config": {"batches": 3, "rows_per_batch": 12, "days": 4}}}
        },
    )
    assert result.success
    trips.refresh()
    # One commit per batch, one file per day each batch touches; ids continue without overlap.
    assert len(trips.snapshots()) == snapshots + 3
    assert int(trips.current_snapshot().summary["total-data-files"]) == files + 3 * 4
    ids = trips.scan(selected_fields=("trip_id",)).to_arrow()["trip_id"]
    assert len(ids) == SCALES["test"].trip_rows + 36 == len(pc.unique(ids))
    md = result.asset_materializations_for_node("icelake_demo__trips_writer")[0].metadata
    assert md["rows_appended"].value == 36 and md["table_data_files"].value == files + 12


def test_the_writer_refuses_a_table_without_the_trips_schema(lake):
    settings, refs, instance = lake
    result = materialize(
        [build_demo_writer(refs["clicks"])],
        instance=instance,
        raise_on_error=False,
        resources={"icelake": IcelakeResource(config_path=settings.source)},
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "does not have the demo's taxi trips schema" in str(failure.event_specific_data.error)


def test_the_consumer_aggregates_the_table_with_spark(lake):
    settings, refs, instance = lake
    trips = load_table(open_catalog(settings, catalog_name(settings)), refs["trips"])
    fares = trips.scan(selected_fields=("fare",)).to_arrow()["fare"]
    result = materialize(
        [build_demo_consumer(refs["trips"])],
        instance=instance,
        resources={
            "icelake_spark": IcebergSparkResource(
                spark_config=spark_config(settings), config_path=settings.source
            )
        },
    )
    assert result.success
    md = result.asset_materializations_for_node("icelake_demo__daily_revenue")[0].metadata
    assert md["days"].value == SCALES["test"].days
    assert md["trips"].value == SCALES["test"].trip_rows
    assert md["revenue"].value == pytest.approx(pc.sum(fares).as_py(), abs=0.01 * SCALES["test"].days)
