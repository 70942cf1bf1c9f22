"""Live observability: per-run sweep results pushed to the lab's Pushgateway (docs/observability.md)."""
