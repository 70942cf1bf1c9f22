"""Sweeps: a scenario (scenario.py) expands into a seeded, shuffled plan of runs (plan.py) that the runner
executes (runner.py), storing each run as it completes (store.py)."""
