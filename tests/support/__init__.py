"""Fixtures and helpers shared by the test trees (tests/<tree>/ never import each other)."""
