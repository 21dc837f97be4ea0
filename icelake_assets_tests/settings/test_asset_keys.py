"""Asset key schemes (settings/asset_keys.py): the default keeps the Iceberg name; a prefix and a
template give a project's own keys; a scheme that could make two tables share a key is refused."""

import pytest
from pydantic import ValidationError

from icelake_assets.settings.asset_keys import AssetKeySettings
from icelake_assets.types import TableRef

REF = TableRef("lake", ("sales", "eu"), "orders")


@pytest.mark.parametrize(
    ("scheme", "path"),
    [
        ({}, ["lake", "sales", "eu", "orders"]),
        ({"prefix": ["team"]}, ["team", "lake", "sales", "eu", "orders"]),
        ({"template": "{namespace}/{table}"}, ["sales", "eu", "orders"]),
        ({"template": "{catalog}_{table}", "prefix": ["a", "b"]}, ["a", "b", "lake_orders"]),
        ({"template": "iceberg/{catalog}/{table}"}, ["iceberg", "lake", "orders"]),
    ],
)
def test_a_scheme_makes_the_key_path(scheme, path):
    keys = AssetKeySettings.model_validate(scheme)
    assert keys.path(REF) == path
    assert (keys == AssetKeySettings()) == (scheme == {})  # only the empty scheme is the default


@pytest.mark.parametrize(
    ("scheme", "says"),
    [
        ({"template": "{namespace}"}, "must contain {table}"),
        ({"template": "{schema}/{table}"}, "unknown field(s) ['schema']"),
        ({"template": "/{table}"}, "empty part"),
        ({"prefix": ["a/b"]}, "without '/'"),
        ({"prefix": [""]}, "non-empty"),
        ({"templates": "{table}"}, "Extra inputs are not permitted"),
    ],
)
def test_a_scheme_that_could_collide_or_is_misspelt_is_refused(scheme, says):
    with pytest.raises(ValidationError, match=None) as err:
        AssetKeySettings.model_validate(scheme)
    assert says in str(err.value)
