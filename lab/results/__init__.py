"""Sweep results: the run record schema (schema.py), atomic writing and resume (store.py), statistics, the
seed-style summary, plots and the self-contained HTML report."""
