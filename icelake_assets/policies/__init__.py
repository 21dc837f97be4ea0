"""Policies as code: the effective policy of one table, the source of each of its values, and what a
mode lets automation do.

Precedence, lowest first (a later layer wins for every key it sets; keys it does not set are inherited):

1. built-in defaults of :class:`~icelake_assets.settings.Policy` (source ``default``);
2. ``thresholds`` of the settings file (the defaults of every table);
3. ``policies.defaults``;
4. ``policies.catalogs[<catalog pattern>]``;
5. ``policies.namespaces[<pattern>]``, matched against ``namespace`` and ``catalog.namespace``;
6. ``policies.tables[<pattern>]``, matched against ``namespace.table`` and ``catalog.namespace.table``;
7. the table's Iceberg properties: ``write.target-file-size-bytes``, ``history.expire.min-snapshots-to-keep``,
   ``history.expire.max-snapshot-age-ms``;
8. the table's ``icelake.<key>`` properties, e.g. ``icelake.snapshots.min_keep=50``,
   ``icelake.owners=team:data,ana@example.com``, ``icelake.tags.tier=gold``.

Table properties (7, 8) can only tighten what the settings file set: only the keys of
:data:`PROPERTY_ALLOWLIST` are read, each only in its safe direction (keep more snapshots, older orphans,
lower caps, longer quiet periods; owners and tags are only added). Mode, operations, schedules, the
sensor, retries and every other key come from the settings file only.

Within one level several patterns may match: the one with more literal (non-wildcard) characters is more
specific and wins; on a tie the one written later in the file wins. Mappings (``tags``,
``configuration.required_properties``) merge key by key; lists (``owners``, ``operations.enabled``) are
replaced whole. A table property that is invalid, not allowlisted or moves a value the unsafe way is
ignored and reported with the reason (a problem of the table, shown by the ``table_configuration``
check and ``icelake policy TABLE``); an invalid settings file is an error.

Modules: :mod:`.resolve` (the layers and the tightening), :mod:`.properties` (what a table property may
set), :mod:`.display` (values and their sources), :mod:`.modes` (what a mode lets automation do),
:mod:`.configuration` (what a table's metadata must carry). The names below are their public API.
"""

from icelake_assets.policies.configuration import (
    ConfigurationReport,
    Violation,
    configuration_report,
    configuration_violations,
)
from icelake_assets.policies.display import (
    DEFAULT_SOURCE,
    MODE_TAG,
    EffectivePolicy,
    PolicyValue,
    format_value,
)
from icelake_assets.policies.modes import Action, decide_action
from icelake_assets.policies.properties import (
    ICEBERG_PROPERTIES,
    PROPERTY_ALLOWLIST,
    PROPERTY_PREFIX,
    Direction,
    LeafPath,
    PropertyLeaf,
    allowed_property_keys,
    policy_leaves,
    property_rule,
    table_property_leaves,
)
from icelake_assets.policies.resolve import (
    PolicyError,
    policy_for,
    resolve_policies,
    resolve_policy,
    settings_layers,
)

__all__ = [
    "DEFAULT_SOURCE",
    "ICEBERG_PROPERTIES",
    "MODE_TAG",
    "PROPERTY_ALLOWLIST",
    "PROPERTY_PREFIX",
    "Action",
    "ConfigurationReport",
    "Direction",
    "EffectivePolicy",
    "LeafPath",
    "PolicyError",
    "PolicyValue",
    "PropertyLeaf",
    "Violation",
    "allowed_property_keys",
    "configuration_report",
    "configuration_violations",
    "decide_action",
    "format_value",
    "policy_for",
    "policy_leaves",
    "property_rule",
    "resolve_policies",
    "resolve_policy",
    "settings_layers",
    "table_property_leaves",
]
