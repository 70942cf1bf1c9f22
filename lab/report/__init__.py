"""What is rendered from a sweep folder: the report (report.py) with its summary (summary.py), HTML (html.py, svg.py),
plots (plots.py), headline (headline.py), why-figures (why.py) and workload tables (workload_report.py); and a merge
of shards into one folder with its report (merge.py)."""
