"""lab/'s layers, written once: every folder (`lab.X` for lab/X/) and every top-level module (`lab.x` for lab/x.py,
`lab` for lab/__init__.py) in one layer, bottom first. A module imports only from its own folder and from layers
below its own; the units of one layer do not import each other (tests/unit/test_layers.py checks every import,
those inside functions too; docs/architecture.md's diagram is rendered from this by `quiclab docs`)."""

from __future__ import annotations

from pathlib import Path

LAB = Path(__file__).resolve().parent

#: (units, what they are), bottom first. No exceptions.
LAYERS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("lab", "lab.errors", "lab.instance", "lab.lines", "lab.signals", "lab.terminal", "lab.layers", "lab.quantiles"),
     "the standard library's level: the version, the error types, a lab's number and its names, reading a "
     "process's lines against a deadline, Ctrl-C and SIGTERM, all output (rich), this order, the one median and "
     "percentile rule"),
    (("lab.config", "lab.protocols", "lab.sizes"), "the lab topology and environment variables, the protocols, sizes"),
    (("lab.compose",), "docker-compose.yml read as data: the lab's services and their fixed addresses"),
    (("lab.models", "lab.docker", "lab.hostnet", "lab.lock"),
     "what a transfer asks for and measured; the only way to Docker (python-on-whales, `docker exec` streams with "
     "deadlines, one error type); the host firewall's allowance; one command per lab at a time"),
    (("lab.agent", "lab.objects", "lab.optional"),
     "a command in an endpoint container, the test objects, the optional parts of the lab"),
    (("lab.link", "lab.workloads"),
     "the link model, its specs and shapers (linkem, netem), router, calibration; workload specs, pages, page "
     "results"),
    (("lab.endpoints",), "the implementation registry (endpoints/implementations.toml) and the client adapters"),
    (("lab.evidence",), "captures, pcap reading, goodput, delivered bytes over time, the sender's view, session "
                        "proofs (resumption, 0-RTT)"),
    (("lab.adverse",), "faults, competing flows, path changes"),
    (("lab.plan",),
     "WHAT to run: scenario (validated fields), checks (the point-dependent checks), plan (points, seeded shuffled "
     "runs, timeouts), settings (a point's dimensions, parsed once), shard, presets (lab/plan/presets/*.toml), "
     "support (whether a run can run here), matrix (the stack matrix's pairs from the registry)"),
    (("lab.calibrate",),
     "a measured path: a user's measurements read into a measurement folder (pcap, ping/irtt, iperf3, flent), "
     "the first estimates of its link, the scenario file that carries them, the search over candidate links, "
     "the measured senders and the fit's start, candidates and record"),
    (("lab.results",),
     "the sweep folder format: schema (RunRecord = runs.csv's row), folder (the manifest), store (runs.csv "
     "appended + fsynced, the manifest written whole), objects.csv, publish (what a reference folder keeps)"),
    (("lab.stats", "lab.observe"),
     "statistics (estimates and intervals, paired and sequential rules, the comparison verdict, the rounds until "
     "decided and their replay, the CC check); "
     "Prometheus/Grafana services and the sweep's live metrics"),
    (("lab.explain",), "each run explained from its own evidence (explain.json), a resume/0rtt run's resumed "
                       "connection timed (sessions.json), the worked examples"),
    (("lab.report",),
     "what is rendered from a folder: report, summary, html, plots, trace plots, headline, why, runs until "
     "decided, the stack matrix's cells, verdicts and heatmap; merge"),
    (("lab.lab",), "bringing the lab up and down"),
    (("lab.run",),
     "HOW a plan runs: runner (one run: plan check -> probes before -> transfer -> probes after -> RunRecord built "
     "once), probes, transfer, workload runner, sender congestion control, the sweep's lifecycle, a lab session, "
     "parallel labs, the rounds of a sweep run until decided, environment facts, startup cache, host load, "
     "reproduce, the calibration search's lab measure"),
    (("lab.bench",), "benchmarks: each runs real sweeps or the real link and renders its own table (the link, "
                     "overhead, parallel labs, start-up, calibration against hidden links)"),
    (("lab.docgen",),
     "the generated docs (`quiclab docs`: seed atlas, its verdicts, censored runs, open questions answered and "
     "0-RTT timelines, blocks, the benchmarks' tables, this diagram)"),
    (("lab.cli",), "the commands (typer + rich): parse, validate, print; only the entry point imports them"),
    (("lab.__main__",), "the entry point"),
)


def rank() -> dict[str, int]:
    """unit -> its layer's index (0 = bottom)."""
    return {u: i for i, (units, _) in enumerate(LAYERS) for u in units}


def unit_of(module: str) -> str:
    """The unit a module belongs to: its folder under lab/ (lab.run for lab.run.sweep), else the module itself."""
    parts = module.split(".")
    if len(parts) >= 2 and (LAB / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module
