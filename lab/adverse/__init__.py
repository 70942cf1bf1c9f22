"""Adverse conditions during a run: scheduled faults, competing traffic, path changes (docs/adverse.md)."""
