"""Agents as operators: ``icelake mcp``, the operator tools over the Model Context Protocol, read-only
unless the settings' ``agents`` section lets an identity write (docs/agents.md)."""
