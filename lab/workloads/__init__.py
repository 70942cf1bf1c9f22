"""Workloads: what one run does on the wire beyond one object on one fresh connection (issue 13).

- spec.py: the workload strings (a scenario dimension: bulk, page:NxSIZE, reuse:NxSIZE, new:NxSIZE, resume:SIZE,
  0rtt:SIZE), parsed and validated;
- result.py: per-object reports -> a verified page result (sans-IO arithmetic);
- pages.py: the page objects on the servers' shared volume;
- curl.py, ngtcp2.py, browser.py: what each client runs and how its output is read;
- sessions.py: resumption and 0-RTT proven from the decrypted capture;
- run.py: one run of a workload (the sweep runner's dispatch calls run.run_workload and run.annotate);
- objects.py: objects.csv, the per-object side file of a sweep; report.py: page tables and plots.
"""
