"""The policy on each table's asset: the `table_configuration` check (required settings read from
pyiceberg metadata, plus table properties the policy had to ignore), and the effective policy shown as
asset metadata, owners and tags."""

from collections.abc import Sequence
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
)

from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.health.findings import Finding, Severity
from icelake_assets.orchestration.checks.group_ops import group_checks
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.policies import (
    ConfigurationReport,
    EffectivePolicy,
    configuration_report,
    format_value,
    resolve_policy,
)

CONFIG_CHECK = "table_configuration"


def _text_table(columns: list[str], rows: list[tuple[str, ...]]) -> MetadataValue:
    return MetadataValue.table(
        records=[TableRecord(dict(zip(columns, row, strict=False))) for row in rows],
        schema=TableSchema(columns=[TableColumn(c, "string") for c in columns]),
    )


def configuration_finding(report: ConfigurationReport, effective: EffectivePolicy) -> Finding:
    """The check as a health finding, so the table's status counts it (orchestration/checks/health.py)."""
    parts = [v.message for v in report.violations] + report.problems
    summary = "; ".join(parts) if parts else "the table carries every required setting"
    if report.passed:
        return Finding(CONFIG_CHECK, Severity.OK, summary, "nothing to change")
    severity = Severity.ERROR if effective.policy.configuration.severity == "error" else Severity.WARN
    return Finding(
        CONFIG_CHECK,
        severity,
        summary,
        "set the required table settings",
        {"violations": len(report.violations), "ignored_properties": len(report.problems)},
    )


def configuration_result(
    report: ConfigurationReport, effective: EffectivePolicy, asset_key
) -> AssetCheckResult:
    required = effective.policy.configuration
    summary = configuration_finding(report, effective).summary
    metadata: dict[str, Any] = {
        "violations": MetadataValue.int(len(report.violations)),
        "ignored_properties": MetadataValue.int(len(report.problems)),
        "summary": MetadataValue.text(summary),
        "required": MetadataValue.json(required.model_dump(mode="json")),
    }
    if report.violations:
        metadata["violation_details"] = _text_table(
            ["setting", "required", "actual"], [(v.setting, v.required, v.actual) for v in report.violations]
        )
    if report.problems:
        metadata["problems"] = MetadataValue.md("\n".join(f"- {p}" for p in report.problems))
    return AssetCheckResult(
        asset_key=asset_key,
        check_name=CONFIG_CHECK,
        passed=report.passed,
        severity=AssetCheckSeverity.ERROR if required.severity == "error" else AssetCheckSeverity.WARN,
        metadata=metadata,
        description=summary,
    )


def _config_specs(table: DiscoveredTable) -> list[AssetCheckSpec]:
    return [
        AssetCheckSpec(
            CONFIG_CHECK,
            asset=table_asset_key(table.ref),
            description=(
                "Required table settings of the policy (format version, file format, write distribution "
                "mode, properties) from Iceberg metadata; also lists policy properties the table sets wrongly."
            ),
        )
    ]


def _evaluate(context: Any, icelake: IcelakeResource, t: DiscoveredTable, selected: set[str]):
    tbl = icelake.load_table(t.ref)
    effective = resolve_policy(icelake.settings, t.ref, tbl.properties)
    report = configuration_report(tbl.metadata.format_version, tbl.properties, effective)
    yield configuration_result(report, effective, table_asset_key(t.ref))


def build_config_checks(name: str, tables: Sequence[DiscoveredTable]) -> list[AssetChecksDefinition]:
    """The `table_configuration` check of ``tables`` (one op for the group)."""
    return [
        group_checks(
            f"{name}__{CONFIG_CHECK}",
            tables,
            _config_specs,
            _evaluate,
            "Required table settings of the policy",
        )
    ]


def policy_asset_metadata(effective: EffectivePolicy) -> dict[str, Any]:
    """The effective policy on the asset: its mode, and every value that is not a built-in default
    with its source (the full list is `icelake policy TABLE`)."""
    metadata: dict[str, Any] = {
        "policy/mode": MetadataValue.text(f"{effective.mode} ({effective.source_of('mode')})"),
        "policy/effective": _text_table(
            ["key", "value", "source"],
            [(v.key, format_value(v.value), v.source) for v in effective.overridden()],
        ),
    }
    if effective.problems:
        metadata["policy/problems"] = MetadataValue.md("\n".join(f"- {p}" for p in effective.problems))
    return metadata
