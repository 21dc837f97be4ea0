"""Configuration policies: the settings a table's metadata must carry, and where it misses them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from icelake_assets.policies.display import EffectivePolicy
from icelake_assets.settings import ConfigurationPolicy


@dataclass(frozen=True)
class Violation:
    setting: str  # table property or metadata field
    required: str
    actual: str

    @property
    def message(self) -> str:
        return f"{self.setting} is {self.actual}, required {self.required}"


def configuration_violations(
    format_version: int, properties: Mapping[str, str], required: ConfigurationPolicy
) -> list[Violation]:
    """Where a table's metadata misses the settings the policy requires."""
    out: list[Violation] = []
    if required.min_format_version is not None and format_version < required.min_format_version:
        out.append(Violation("format-version", f">= {required.min_format_version}", str(format_version)))
    if required.file_format is not None:
        actual = properties.get("write.format.default", "parquet").lower()  # Iceberg's default
        if actual != required.file_format:
            out.append(Violation("write.format.default", required.file_format, actual))
    if required.write_distribution_mode is not None:
        mode = properties.get("write.distribution-mode")
        if mode is None or mode.lower() != required.write_distribution_mode:
            out.append(
                Violation("write.distribution-mode", required.write_distribution_mode, mode or "unset")
            )
    for key, value in sorted(required.required_properties.items()):
        current = properties.get(key)
        if current != value:
            out.append(Violation(key, value, "unset" if current is None else current))
    return out


@dataclass(frozen=True)
class ConfigurationReport:
    violations: list[Violation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations and not self.problems


def configuration_report(
    format_version: int, properties: Mapping[str, str], effective: EffectivePolicy
) -> ConfigurationReport:
    """Violations of the required settings plus the table's ignored policy properties."""
    return ConfigurationReport(
        configuration_violations(format_version, properties, effective.policy.configuration),
        list(effective.problems),
    )
