"""Configuration policies: what a table's metadata must carry."""

from icelake_assets.policies import (
    configuration_violations,
)
from icelake_assets.settings import (
    ConfigurationPolicy,
)


def test_configuration_violations():
    required = ConfigurationPolicy(
        min_format_version=2,
        file_format="parquet",
        write_distribution_mode="hash",
        required_properties={"write.metadata.delete-after-commit.enabled": "true"},
    )
    good = {"write.distribution-mode": "hash", "write.metadata.delete-after-commit.enabled": "true"}
    assert configuration_violations(2, good, required) == []
    assert configuration_violations(3, {**good, "write.format.default": "PARQUET"}, required) == []
    bad = configuration_violations(1, {"write.format.default": "orc"}, required)
    assert [(v.setting, v.required, v.actual) for v in bad] == [
        ("format-version", ">= 2", "1"),
        ("write.format.default", "parquet", "orc"),
        ("write.distribution-mode", "hash", "unset"),
        ("write.metadata.delete-after-commit.enabled", "true", "unset"),
    ]
    assert bad[0].message == "format-version is 1, required >= 2"
    assert configuration_violations(1, {}, ConfigurationPolicy()) == []  # nothing required by default
