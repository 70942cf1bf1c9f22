"""How a plan runs (the top of the program below the CLI): the runner executes each planned run (runner.py) with
its probes (probes.py), through the transfer (transfer.py) or the workload runner (workload.py), with the sender's
congestion control in force (sender.py). A sweep's one lifecycle (sweep.py) drives it over a sweep folder
(lab/results/store.py): one lab's part is a LabSession (lab_session.py: its facts, context, run loop, close), in
this process or in each worker of parallel labs (parallel.py: the coordination only); it records the environment
(environment.py, startup_cache.py) and judges the host's load (hostload.py); reproduce.py re-runs a committed
sweep."""
