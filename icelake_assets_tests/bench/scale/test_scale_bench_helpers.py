"""The scale benchmark's helpers (bench/scale/): the UI's GraphQL documents read from the installed
bundle, and the parallel lake generation (two processes writing one SQLite catalog)."""

import json
import sqlite3
from contextlib import closing

from bench.scale import ui_documents
from bench.scale.scale_ui import RECORDS_BATCH
from bench.scale.sensor_lake import DEGRADED_APPENDS, _catalog, generate, layout


def _bundle(tmp_path, *sources: str):
    chunks = tmp_path / "_next" / "static" / "chunks"
    chunks.mkdir(parents=True)
    (chunks / "1.js.map").write_text(json.dumps({"sources": ["a.tsx"], "sourcesContent": list(sources)}))
    return tmp_path


def test_document_is_the_query_plus_every_fragment_it_spreads_transitively(tmp_path):
    build = _bundle(
        tmp_path,
        "export const Q = gql`\n  query Q($n: Int) {\n    things(n: $n) { ...A ... on X { y } }\n  }\n"
        "  ${A_FRAGMENT}\n`;\nconst z = 1;",
        "export const A = gql`\n  fragment A on Thing { id ...B }\n  ${B}\n`;\n"
        "export const B = gql`fragment B on Thing { name }`;\n"
        "export const U = gql`fragment Unused on T { x }`;",
    )
    ui_documents.definitions.cache_clear()
    doc = ui_documents.document("Q", build)
    assert doc.startswith("query Q($n: Int) {") and "${" not in doc
    assert [line.split()[1] for line in doc.splitlines() if line.startswith("fragment")] == ["A", "B"]
    assert "Unused" not in doc and "fragment on" not in doc


def test_a_missing_operation_or_fragment_is_named(tmp_path):
    build = _bundle(tmp_path, "gql`query Q { a { ...Gone } }`")
    ui_documents.definitions.cache_clear()
    for name, expected in (("Nope", "no GraphQL operation 'Nope'"), ("Q", "fragment 'Gone' not found")):
        try:
            ui_documents.document(name, build)
        except KeyError as err:
            assert expected in str(err)
        else:
            raise AssertionError(f"{name}: no error")


def test_the_installed_ui_has_the_queries_the_bench_times():
    ui_documents.definitions.cache_clear()
    for op in (
        "CodeLocationStatusQuery",
        "LocationWorkspaceQuery",
        "LocationWorkspaceAssetsQuery",
        "AssetRecordsQuery",
        "AssetCatalogTableQuery",
        "AssetHealthQuery",
        "AssetGraphLiveQuery",
    ):
        doc = ui_documents.document(op)
        assert doc.split("(")[0].split("{")[0].strip() == f"query {op}"
    assert "$limit" in ui_documents.document("AssetRecordsQuery") and RECORDS_BATCH == 1000


def test_two_generation_workers_write_every_table_with_its_appends(tmp_path):
    tables = layout(40)  # 10 namespaces of 4: workers get disjoint namespaces
    generate(tmp_path, tables, healthy_appends=2, workers=2)
    cat = _catalog(tmp_path)
    counts = {t.key: len(cat.load_table(t.identifier).snapshots()) for t in tables}
    assert counts == {t.key: DEGRADED_APPENDS if t.degraded else 2 for t in tables}
    cat.engine.dispose()
    with closing(sqlite3.connect(tmp_path / "catalog.db")) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file to cache
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.db", "warehouse"]
