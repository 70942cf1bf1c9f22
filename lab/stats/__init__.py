"""Statistics over a sweep folder's records: per-group estimates and intervals (stats.py), the sweep's statistics
(sweep_stats.py), the congestion-control check (cc_check.py) and its analytic models (models.py), the paired and
sequential rules (paired.py, sequential.py), the one comparison rule (verdict.py), and how a statistic prints
(fmt.py)."""
