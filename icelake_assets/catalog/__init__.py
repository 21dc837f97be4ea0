"""Catalog access (pyiceberg), table discovery, and the Spark view of the same catalogs."""

from icelake_assets.catalog.connection import (
    CatalogUnavailableError,
    TableMissingError,
    TableRef,
    open_catalog,
)

__all__ = ["CatalogUnavailableError", "TableMissingError", "TableRef", "open_catalog"]
