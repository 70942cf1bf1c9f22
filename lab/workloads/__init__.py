"""Workloads: what one run does on the wire beyond one object on one fresh connection (issue 13).

- spec.py: the workload strings (a scenario dimension: bulk, page:NxSIZE, reuse:NxSIZE, new:NxSIZE, resume:SIZE,
  0rtt:SIZE), parsed and validated;
- result.py: per-object reports -> a verified page result (sans-IO arithmetic);
- pages.py: the page objects on the servers' shared volume;
- curl.py, ngtcp2.py, browser.py: what each client runs and how its output is read;
- resumption and 0-RTT are proven from the decrypted capture in lab/evidence/sessions.py;
- one run of a workload is lab/run/workload.py (the runner's one dispatch), its columns the workload probe's
  (lab/run/probes.py); objects.csv is lab/results/objects_csv.py, the page tables and plots
  lab/report/workload_report.py.
"""
