"""The lab's `measure` for the calibration search (lab/calibrate/search.py `Measure`): each candidate link put in
force on this process's lab (QUICLAB_INSTANCE), then every measured sender run through it, one after the other.

A sender (lab/calibrate/senders.py) is iperf3 with its congestion control, for as long as the user's run: an
`iperf3 -s -1` in the receiving container (the client's for a download), `iperf3 -c ... -C CC -t S --json` in the
sending one, whose JSON (the sender's side: its smoothed RTT per interval) is read by the same reader as the user's
(lab/calibrate/tools.py) and reduced by the same rule (senders.observed). A candidate iperf3 could not measure (its
own error, e.g. no connection through a 50 % loss link) is None: censored by the search, never chosen. The lab
failing (Docker, a container gone) raises: the search stops, nothing is recorded as a result. Every process is
named `qlc-<tag>-...` and stopped in a `finally` (Ctrl-C too): nothing is left running.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from lab import config, docker, lock
from lab.calibrate.scenario_file import Table
from lab.calibrate.search import Candidate, Fit, Observed, Result, search
from lab.calibrate.senders import Sender, observed
from lab.calibrate.tools import iperf3_flow
from lab.errors import EnvironmentProblem, UsageError
from lab.link import shaper
from lab.link.model import Link
from lab.link.spec import parse_link

PORT = 5399
_LISTEN_TIMEOUT_S = 10.0
_SLACK_S = 30.0  # beyond the sender's own time: connection set-up, iperf3's end exchange


@dataclass(frozen=True)
class Ends:
    """Who sends and who receives for a direction: (sending container, receiving container, receiver address)."""

    sender: str
    receiver: str
    address: str


def ends(direction: str) -> Ends:
    if direction == "down":
        return Ends(config.SERVER_CONTAINER, config.CLIENT_CONTAINER, config.CLIENT_IP)
    return Ends(config.CLIENT_CONTAINER, config.SERVER_CONTAINER, config.SERVER_IP)


def named(name: str, argv: list[str]) -> list[str]:
    """argv under the process name `name` (so `pkill -f name` finds exactly it)."""
    return ["bash", "-c", 'exec -a "$0" "$@"', name, *argv]


def receiver_argv(port: int = PORT) -> list[str]:
    return ["iperf3", "-s", "-1", "-p", str(port)]


def sender_argv(s: Sender, address: str, port: int = PORT) -> list[str]:
    return ["iperf3", "-c", address, "-p", str(port), "-C", s.cc, "-t", str(s.seconds), "--json",
            "--connect-timeout", "3000"]


def sender_json(out: str, s: Sender) -> Observed | None:
    """One sender's observation from its iperf3 JSON, or None when iperf3 did not measure (its own error) or the
    run has no RTT samples. A run with another congestion control than asked is the lab's failure."""
    try:
        flow = iperf3_flow(json.loads(out), f"iperf3 {s.cc} in the lab")
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
            shaper.apply(parse_link(*self.tables(c)), "linkem")
            got: dict[str, Observed] = {}
            for name, s in self.senders.items():
                one = run_sender(s)
                if one is None:
                    break
                got[name] = one
            result: Result | None = got if len(got) == len(self.senders) else None
            self.measured += 1
            self.on_candidate(self.measured, c, result)
            out.append(result)
        return out


def check_allowed(senders: Mapping[str, Sender]) -> None:
    """Every sender's congestion control is one the sending container may choose (EnvironmentProblem naming the
    sysctl otherwise: scripts/setup.sh extends it)."""
    for way in sorted({s.direction for s in senders.values()}):
        container = ends(way).sender
        allowed = docker.exec_in(container, ["cat", "/proc/sys/net/ipv4/tcp_allowed_congestion_control"]).split()
        missing = sorted(s.cc for s in senders.values() if s.direction == way and s.cc not in allowed)
        if missing:
            raise EnvironmentProblem(f"the calibration's senders need {', '.join(missing)}, which the host does not "
                                     f"let endpoints choose (net.ipv4.tcp_allowed_congestion_control = "
                                     f"{' '.join(allowed)!r}; scripts/setup.sh extends it)")


def run_sender(s: Sender) -> Observed | None:
    """One sender's run through the link in force: its observation, or None when iperf3 could not measure."""
    e = ends(s.direction)
    tag = f"qlc-{uuid.uuid4().hex[:10]}"
    try:
        docker.exec_detached(e.receiver, named(f"{tag}-srv", receiver_argv()))
        _wait_listening(e.receiver)
        try:
            out = docker.exec_in(e.sender, named(f"{tag}-snd", sender_argv(s, e.address)),
                                 timeout_s=s.seconds + _SLACK_S)
        except docker.DockerError as err:  # iperf3 exits 1 on its own errors, its JSON on stdout says which
            if not err.stdout or '"error"' not in err.stdout:
                raise
            out = err.stdout
        return sender_json(out, s)
    finally:
        for container in (e.sender, e.receiver):
            with contextlib.suppress(EnvironmentProblem):
                docker.exec_in(container, ["pkill", "-f", tag], timeout_s=10)


def _wait_listening(container: str) -> None:
    deadline = time.monotonic() + _LISTEN_TIMEOUT_S
    while f":{PORT}" not in docker.exec_in(container, ["ss", "-Hltn", f"sport = :{PORT}"]):
        if time.monotonic() > deadline:
            raise EnvironmentProblem(f"iperf3 did not start listening on port {PORT} in {container}")
        time.sleep(0.05)


def search_in_lab(senders: Mapping[str, Sender], real: Result, start_at: Candidate,
                  tables: Callable[[Candidate], tuple[Table, Table, Table]], budget: int,
                  on_candidate: Callable[[int, Candidate, Result | None], None]) -> Fit:
    """The search (lab/calibrate/search.py) with this lab measuring, the lab held for the whole search; afterwards
    (also after Ctrl-C or a failure) the lab's link is left unshaped and no sender runs."""
    with lock.holding():
        check_allowed(senders)
        try:
            return search(real, start_at, LabMeasure(senders, tables, on_candidate), budget=budget)
        finally:
            with contextlib.suppress(EnvironmentProblem):
                shaper.apply(Link(), "linkem")


def measure_on(tables: tuple[Table, Table, Table], sender: Sender) -> Observed | None:
    """One sender through one link on this lab, the lab held; the link left unshaped afterwards."""
    with lock.holding():
        check_allowed({sender.cc: sender})
        try:
            shaper.apply(parse_link(*tables), "linkem")
            return run_sender(sender)
        finally:
            with contextlib.suppress(EnvironmentProblem):
                shaper.apply(Link(), "linkem")


# --- measuring a path as a user would (the benchmark's hidden links) -------------------------------------------------

def user_download(s: Sender) -> str:
    """A download as a user records it from the client: `iperf3 -R` from the server's own iperf3 (port 5201), with
    the server's (the sender's) side in the same JSON (--get-server-output)."""
    tag = f"qlc-{uuid.uuid4().hex[:10]}"
    argv = ["iperf3", "-c", config.SERVER_IP, "-R", "-C", s.cc, "-t", str(s.seconds), "--json", "--get-server-output",
            "--connect-timeout", "3000"]
    try:
        return docker.exec_in(config.CLIENT_CONTAINER, named(f"{tag}-user", argv), timeout_s=s.seconds + _SLACK_S)
    except docker.DockerError as err:  # iperf3's own error: its JSON says which (probe refuses it, naming it)
        if err.stdout and '"error"' in err.stdout:
            return err.stdout
        raise
    finally:
        with contextlib.suppress(EnvironmentProblem):
            docker.exec_in(config.CLIENT_CONTAINER, ["pkill", "-f", tag], timeout_s=10)


def user_ping(count: int = 50) -> str:
    """ping's output from the client to the server, without load (replies lost on a lossy link are just missing)."""
    try:
        return docker.exec_in(config.CLIENT_CONTAINER, ["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "3",
                                                        config.SERVER_IP], timeout_s=count * 0.2 + 30)
    except docker.DockerError as err:  # ping exits 1 when some replies were lost: what it printed still counts
        if err.stdout and "bytes from" in err.stdout:
            return err.stdout
        raise
