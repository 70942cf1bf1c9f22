"""Every run explained from its own evidence (issue 25): handshake round trips, path truth, loss and recovery,
windows, and a ranked list of reasons, per run, as `explain.json` beside the run's evidence (docs/explain.md).

Sans-IO analysis (`rows`, `path`, `analyze`): packets and tshark's field rows in, an `Explanation` out; `tshark`
runs tshark in the router container; `folder` explains the runs of a finished sweep folder; `resumed` times the
resumed connection of a resume/0rtt run (`sessions.json`: what 0-RTT sent early, what still waited).
"""
