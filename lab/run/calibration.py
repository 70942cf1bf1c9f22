"""The lab's `measure` for the calibration search (lab/calibrate/search.py `Measure`): each candidate link put in
force on this process's lab (QUICLAB_INSTANCE), then every measured sender run through it, one after the other.

A sender (lab/calibrate/senders.py) is a download by iperf3 with its congestion control, for as long as the user's
run, recorded as a user records it: `iperf3 -c SERVER -R -C CC -t S --json --get-server-output` in the client
(against a one-off `iperf3 -s -1 --json` in the server's container), so the file holds the receiver's rates and, as
`server_output_json`, the sender's RTT per interval; it is read by the same reader as the user's files
(lab/calibrate/tools.py) and reduced by the same rule (senders.observed). A candidate iperf3 could not measure (its
own error, e.g. no connection through a 50 % loss link) is None: censored by the search, never chosen. The lab
failing (Docker, a container gone, a server whose output came back as text) raises: the search stops, nothing is
recorded as a result. Every process is named `qlc-<tag>-...` and
stopped in a `finally` (Ctrl-C too): nothing is left running.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lab import config, docker, lock
from lab.calibrate.scenario_file import Table
from lab.calibrate.search import NO_LIMITS, Candidate, Fit, Limits, Observed, Result, search
from lab.calibrate.senders import Sender, observed
from lab.calibrate.tools import iperf3_flow
from lab.errors import EnvironmentProblem, UsageError
from lab.evidence.capture import client_side_tcp
from lab.link import shaper
from lab.link.model import Link
from lab.link.spec import parse_link
from lab.quantiles import median

PORT = 5399  # the one-off server a download fetches from (the server container's own iperf3 on 5201 runs without
#              --json: images/server/entrypoint.sh)
_LISTEN_TIMEOUT_S = 10.0
_SLACK_S = 30.0  # beyond the sender's own time: connection set-up, iperf3's end exchange


def named(name: str, argv: list[str]) -> list[str]:
    """argv under the process name `name` (so `pkill -f name` finds exactly it)."""
    return ["bash", "-c", 'exec -a "$0" "$@"', name, *argv]


def receiver_argv(port: int = PORT) -> list[str]:
    """The one-off server a download fetches from (in the server's container), with --json: --get-server-output
    hands the client the server's output in the server's own format (iperf3(1): "if the server was invoked with the
    --json flag, the output will be in JSON format, otherwise it will be in human-readable format"; iperf_api.c
    send_results: `server_output_json` = the server's whole JSON document only when the server itself runs with
    --json, else `server_output_text`, lines with Retr and Cwnd but no RTT). The client's --json is not passed on to
    the server, so without this flag the sender's RTT never reaches the client's file."""
    return ["iperf3", "-s", "-1", "--json", "-p", str(port)]


def download_argv(s: Sender, port: int = PORT) -> list[str]:
    """A download as a user runs it in the client: the server sends with `s.cc`, its side in the JSON too; reads of
    16 KiB (`-l`; iperf3's default 128 KiB makes each 1 s interval a multiple of 1.05 Mbit/s). A sender whose
    direction is up is an upload (no -R): the client sends with `s.cc`, the receiving server's side in the JSON."""
    reverse = ["-R"] if s.direction == "down" else []
    return ["iperf3", "-c", config.SERVER_IP, "-p", str(port), *reverse, "-C", s.cc, "-t", str(s.seconds), "-l",
            "16K", "--json", "--get-server-output", "--connect-timeout", "3000"]


def sender_json(out: str, s: Sender) -> Observed | None:
    """One sender's observation from its iperf3 JSON, or None when iperf3 did not measure (its own error) or the
    run has no RTT samples. A run with another congestion control than asked, or a server whose output came back as
    text (it ran without --json: no RTT for any candidate), is the lab's failure."""
    try:
        doc = json.loads(out)
        if isinstance(doc, dict) and not doc.get("error") and "server_output_json" not in doc \
                and "server_output_text" in doc:
            raise EnvironmentProblem("the lab's iperf3 server sent its output as text (it ran without --json), so "
                                     "the sender's RTT is not in the client's file: see receiver_argv")
        flow = iperf3_flow(doc, f"iperf3 {s.cc} in the lab")
    except (ValueError, UsageError):
        return None
    if flow.cc and flow.cc != s.cc:
        raise EnvironmentProblem(f"iperf3 asked for {s.cc} but its sender used {flow.cc}")
    return observed(flow)


@dataclass
class LabMeasure:
    """Measure (lab/calibrate/search.py) on this process's lab; `on_candidate(index, candidate, result)` after each
    one (progress). Use it inside `lab.lock.holding()`."""

    senders: Mapping[str, Sender]
    tables: Callable[[Candidate], tuple[Table, Table, Table]]  # the candidate's link: [link], [link.down], [link.up]
    on_candidate: Callable[[int, Candidate, Result | None], None] = lambda _i, _c, _r: None
    measured: int = 0

    def __call__(self, candidates: Sequence[Candidate]) -> list[Result | None]:
        out: list[Result | None] = []
        for c in candidates:
            link = parse_link(*self.tables(c))
            shaper.apply(link, "linkem")
            got: dict[str, Observed] = {}
            for name, s in self.senders.items():
                one = run_sender(s, restart_trace(link))
                if one is None:
                    break
                got[name] = one
            result: Result | None = got if len(got) == len(self.senders) else None
            self.measured += 1
            self.on_candidate(self.measured, c, result)
            out.append(result)
        return out


def check_allowed(senders: Mapping[str, Sender]) -> None:
    """Every sender's congestion control is one the server's container (the sender of a download) may choose
    (EnvironmentProblem naming the sysctl otherwise: scripts/setup.sh extends it)."""
    allowed = docker.exec_in(config.SERVER_CONTAINER,
                             ["cat", "/proc/sys/net/ipv4/tcp_allowed_congestion_control"]).split()
    missing = sorted({s.cc for s in senders.values()} - set(allowed))
    if missing:
        raise EnvironmentProblem(f"the calibration's senders need {', '.join(missing)}, which the host does not "
                                 f"let endpoints choose (net.ipv4.tcp_allowed_congestion_control = "
                                 f"{' '.join(allowed)!r}; scripts/setup.sh extends it)")


def run_sender(s: Sender, at_start: Callable[[], None] | None = None) -> Observed | None:
    """One sender's download through the link in force: its observation, or None when iperf3 could not measure.
    `at_start` runs right before the download (after its server is up): the benchmark restarts a recorded trace
    there."""
    return sender_json(one_off_download(s, at_start), s)


def one_off_download(s: Sender, at_start: Callable[[], None] | None = None) -> str:
    """The client's JSON of one download from a one-off --json server started for it (stopped afterwards)."""
    tag = f"qlc-{uuid.uuid4().hex[:10]}"
    try:
        docker.exec_detached(config.SERVER_CONTAINER, named(f"{tag}-srv", receiver_argv()))
        _wait_listening(config.SERVER_CONTAINER)
        if at_start is not None:
            at_start()
        return download(s, PORT, tag)
    finally:
        with contextlib.suppress(EnvironmentProblem):
            docker.exec_in(config.SERVER_CONTAINER, ["pkill", "-f", tag], timeout_s=10)


def download(s: Sender, port: int, tag: str) -> str:
    """The client's JSON of one download (iperf3's own error too: its JSON says which); the client's iperf3 stopped
    afterwards whatever happened."""
    try:
        return docker.exec_in(config.CLIENT_CONTAINER, named(f"{tag}-dl", download_argv(s, port)),
                              timeout_s=s.seconds + _SLACK_S)
    except docker.DockerError as err:  # iperf3 exits 1 on its own errors, its JSON on stdout says which
        if err.stdout and '"error"' in err.stdout:
            return err.stdout
        raise
    finally:
        with contextlib.suppress(EnvironmentProblem):
            docker.exec_in(config.CLIENT_CONTAINER, ["pkill", "-f", tag], timeout_s=10)


def _wait_listening(container: str) -> None:
    deadline = time.monotonic() + config.deadline(_LISTEN_TIMEOUT_S)
    while f":{PORT}" not in docker.exec_in(container, ["ss", "-Hltn", f"sport = :{PORT}"]):
        if time.monotonic() > deadline:
            raise EnvironmentProblem(f"iperf3 did not start listening on port {PORT} in {container}")
        time.sleep(0.05)


def search_in_lab(senders: Mapping[str, Sender], real: Result, start_at: Candidate,
                  tables: Callable[[Candidate], tuple[Table, Table, Table]], budget: int,
                  on_candidate: Callable[[int, Candidate, Result | None], None],
                  first: tuple[Sequence[float] | None, Limits] = (None, NO_LIMITS),
                  shapes: Sequence[Candidate] = ()) -> Fit:
    """The search (lab/calibrate/search.py) with this lab measuring, the lab held for the whole search; afterwards
    (also after Ctrl-C or a failure) the lab's link is left unshaped and no sender runs. `first`: the first
    batch's losses (None: the search's grid) and the evidence's limits (lab/calibrate/fit.py search_range);
    `shapes`: the start with the downlink's other shape (fit.shapes)."""
    with lock.holding():
        check_allowed(senders)
        try:
            return search(real, start_at, LabMeasure(senders, tables, on_candidate), budget=budget,
                          losses=first[0], limits=first[1], shapes=shapes)
        finally:
            with contextlib.suppress(EnvironmentProblem):
                shaper.apply(Link(), "linkem")


def restart_trace(link: Link) -> Callable[[], None] | None:
    """For a link with a rate trace: what gives it again right before a sender's download (every sender meets the
    trace from its beginning, as the sweep's runs do: lab/run/runner.py _restart_trace); None for a link without."""
    if not (link.downlink.trace_ms or link.uplink.trace_ms):
        return None
    return lambda: shaper.apply(link, "linkem")


def measure_on(tables: tuple[Table, Table, Table], sender: Sender, times: int = 1) -> list[Observed | None]:
    """A sender `times` times in a row through one link on this lab (a trace from its beginning each time), the lab
    held; the link left unshaped afterwards. Each run's observation (None: iperf3 could not measure it)."""
    with lock.holding():
        check_allowed({sender.cc: sender})
        try:
            link = parse_link(*tables)
            shaper.apply(link, "linkem")
            return run_times(sender, times, restart_trace(link))
        finally:
            with contextlib.suppress(EnvironmentProblem):
                shaper.apply(Link(), "linkem")


def run_times(s: Sender, times: int, at_start: Callable[[], None] | None = None) -> list[Observed | None]:
    """The sender `times` times in a row through the link in force (`at_start` before each)."""
    return [run_sender(s, at_start) for _ in range(times)]


def median_observed(runs: Sequence[Observed | None]) -> Observed | None:
    """The figure of repeated runs of one sender: the median throughput and the median p50 RTT of the measured
    runs, each on its own (None unless more than half were measured: a figure of a minority is not the path's)."""
    got = [r for r in runs if r is not None]
    if not got or 2 * len(got) <= len(runs):
        return None
    return Observed(throughput_bps=median([r.throughput_bps for r in got]),
                    p50_rtt_s=median([r.p50_rtt_s for r in got]))


# --- measuring a path as a user would (the benchmark's hidden links) -------------------------------------------------

def user_download(s: Sender, at_start: Callable[[], None] | None = None, capture: Path | None = None) -> str:
    """A download as a user records it from the client (`iperf3 -R --json --get-server-output`), from a server the
    user started with `iperf3 -s --json` (docs/calibrate.md: without --json the server's side, its RTT, is not in
    the file; the server container's own iperf3 on 5201 runs without it); with `capture`, its packets as the
    client receives them written there too (`tcpdump -s 96 -w FILE tcp port 5399` on the client)."""
    if capture is None:
        return one_off_download(s, at_start)
    with client_side_tcp(capture, PORT):
        return one_off_download(s, at_start)


def user_ping(count: int = 50) -> str:
    """ping's output from the client to the server, without load (replies lost on a lossy link are just missing)."""
    try:
        return docker.exec_in(config.CLIENT_CONTAINER, ["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "3",
                                                        config.SERVER_IP], timeout_s=count * 0.2 + 30)
    except docker.DockerError as err:  # ping exits 1 when some replies were lost: what it printed still counts
        if err.stdout and "bytes from" in err.stdout:
            return err.stdout
        raise
