"""How a plan runs (the top of the program below the CLI): the runner executes each planned run (runner.py) with
its probes (probes.py), through the transfer (transfer.py) or the workload runner (workload.py), with the sender's
congestion control in force (sender.py); a session (session.py) or parallel labs (parallel.py) drive the runner
over a sweep folder (lab/results/store.py), record the environment (environment.py, startup_cache.py) and judge
the host's load (hostload.py); reproduce.py re-runs a committed sweep."""
