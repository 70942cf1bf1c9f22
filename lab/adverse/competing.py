"""Competing traffic: background downloads through the same bottleneck, a queueing-delay probe, and a capture of
what the bottleneck delivered to the client (per-flow throughput, Jain's index: lab/adverse/fairness.py).

- TCP: iperf3 -R (the server sends), one iperf3 server per flow in the nginx server's container on port 5301+i,
  `-C cubic|bbr|reno` (the server's socket; the host must allow it: net.ipv4.tcp_allowed_congestion_control,
  which scripts/setup.sh extends). The congestion control actually in use is read from `ss -ti` in the server.
- UDP: iperf3 -R -u at a constant rate.
- QUIC: gtlsclient downloading a large object, again and again, from a server other than the measured one (ngtcp2,
  or nginx when ngtcp2 is measured), so that the capture tells the flows apart by server address.
- Probe: ping every 100 ms from the client to the nginx server's address; its RTT minus the link's base RTT is the
  queueing delay (plus the lab's ~0.3 ms).
- Capture: tcpdump in the router on its client-side interface, headers only, packets toward the client network
  (CAPTURE_FILTER), in immediate mode: without it libpcap hands packets over in blocks (filled, or after its 1 s
  timeout), and the block still filling when tcpdump is stopped is lost: the last few hundred ms of every run.

Every process is named `qla-<tag>-...` (bash `exec -a`), so stopping them never touches anything else.
"""

from __future__ import annotations

import base64
import contextlib
import re
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from lab import config, docker, objects
from lab.adverse import fairness
from lab.adverse.spec import Flow
from lab.endpoints.registry import registry
from lab.errors import EnvironmentProblem
from lab.evidence.pcap import PcapError, read_pcap
from lab.link import router
from lab.quantiles import quantile

BASE_PORT = 5301
PROBE_INTERVAL_S = 0.1
#: The background QUIC download's object (downloaded again and again until the run ends).
QUIC_OBJECT_BYTES = 200_000_000
_START_TIMEOUT_S = 10.0
_CAPTURE = "/tmp/quiclab-competing"
#: What the capture keeps: TCP and UDP toward the client network, not only the main client's address: the measured
#: client may have its own container (quic-go-client, quinn-client, chromium, ...; each its own address there) while
#: the background flows go to the main client; flows are told apart by their server's address and port (fairness.py)
CAPTURE_FILTER = ["ip", "and", "dst", "net", config.INSTANCE.subnet("client"), "and", "(", "tcp", "or", "udp", ")"]


def _exec(container: str, argv: list[str], timeout_s: float = 15) -> str:
    return docker.exec_in(container, argv, timeout_s=timeout_s)


def _named(name: str, argv: list[str]) -> list[str]:
    """Run argv under the process name `name` (so `pkill -f name` finds exactly it)."""
    return ["bash", "-c", 'exec -a "$0" "$@"', name, *argv]


@dataclass
class Running:
    flow: Flow
    name: str            # flow name in results: "tcp-cubic#1"
    key: tuple[str, int]  # (server address, server port) of its packets toward the client
    proc: docker.Stream | None = None
    started_s: float | None = None
    cc_seen: str | None = None
    error: str = ""


@dataclass
class Competition:
    """Background flows + probe + capture for one run."""

    flows: tuple[Flow, ...]
    measured_key: tuple[str, int]
    measured_server: str
    timeout_s: float
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    running: list[Running] = field(default_factory=list)
    probe: docker.Stream | None = None
    capture: docker.Stream | None = None
    capture_path: str = ""
    problems: list[str] = field(default_factory=list)
    lab_problem: bool = False  # the lab, not the flows, failed: the run is not a result

    def _name(self, what: str) -> str:
        return f"qla-{self.tag}-{what}"

    # --- before the transfer ---------------------------------------------------------------------------------
    def prepare(self) -> None:
        """iperf3 servers listening, the QUIC object made, the capture running."""
        wanted = {f.cc for f in self.flows if f.kind == "tcp"}
        if wanted:
            allowed = _exec(config.SERVER_CONTAINER, ["cat", "/proc/sys/net/ipv4/tcp_allowed_congestion_control"])
            missing = sorted(str(cc) for cc in wanted if cc not in allowed.split())
            if missing:
                raise EnvironmentProblem(
                    f"competing TCP flows need {', '.join(missing)}, which the host does not let endpoints choose "
                    f"(net.ipv4.tcp_allowed_congestion_control = {allowed.strip()!r}): as root on the host, "
                    f"sysctl -w net.ipv4.tcp_allowed_congestion_control=\"{allowed.strip()} {' '.join(missing)}\" "
                    "(scripts/setup.sh does it)")
        counts: dict[str, int] = {}
        for i, flow in enumerate(self.flows):
            counts[flow.label] = counts.get(flow.label, 0) + 1
            name = f"{flow.label}#{counts[flow.label]}"
            if flow.kind in ("tcp", "udp"):
                port = BASE_PORT + i
                docker.exec_detached(
                    config.SERVER_CONTAINER, _named(self._name(f"srv{i}"), ["iperf3", "-s", "-1", "-p", str(port)]))
                self.running.append(Running(flow, name, (config.SERVER_IP, port)))
            else:
                server = registry().competing_quic(self.measured_server)
                assert server.address is not None and server.port is not None
                self.running.append(Running(flow, name, (server.address, server.port)))
        if any(r.flow.kind == "quic" for r in self.running):
            objects.ensure(QUIC_OBJECT_BYTES)
        deadline = time.monotonic() + config.deadline(_START_TIMEOUT_S)
        for r in self.running:
            if r.flow.kind == "quic":
                continue
            while f":{r.key[1]}" not in _exec(config.SERVER_CONTAINER, ["ss", "-Hltn", f"sport = :{r.key[1]}"]):
                if time.monotonic() > deadline:
                    raise EnvironmentProblem(f"iperf3 server on port {r.key[1]} did not start in the server")
                time.sleep(0.05)
        self._start_capture()

    def _start_capture(self) -> None:
        ifs = router.interfaces()
        router.run("mkdir", "-p", _CAPTURE)
        self.capture_path = f"{_CAPTURE}/{self.tag}.pcap"
        # The run's processes are stopped by stop(); their deadline is only a backstop (docker.RUN_SCOPED_DEADLINE_S).
        self.capture = docker.Stream(
            docker.exec_args(config.ROUTER_CONTAINER, _named(self._name("cap"), [
                "tcpdump", "-i", ifs.client_side, "-n", "-s", "96", "-U", "--immediate-mode", "-B", "8192", "-w",
                self.capture_path, *CAPTURE_FILTER])),
            deadline_s=docker.RUN_SCOPED_DEADLINE_S, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + config.deadline(_START_TIMEOUT_S)
        while (line := self.capture.line(deadline, "stderr")) is not None:
            if "listening on" in line:
                return
        raise EnvironmentProblem("tcpdump for the competing flows did not start in the router")

    def start_probe(self) -> None:
        self.probe = docker.Stream(
            docker.exec_args(config.CLIENT_CONTAINER, _named(self._name("probe"), [
                "ping", "-n", "-D", "-i", f"{PROBE_INTERVAL_S:g}", "-W", "2", config.SERVER_IP])),
            deadline_s=docker.RUN_SCOPED_DEADLINE_S, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    # --- during (scheduler thread) ---------------------------------------------------------------------------
    def start_flow(self, index: int, offset_s: float) -> None:
        r = self.running[index]
        name = self._name(f"flow{index}")
        secs = str(max(10, round(self.timeout_s + 10)))
        if r.flow.kind == "tcp":
            argv = ["iperf3", "-c", r.key[0], "-p", str(r.key[1]), "-R", "-t", secs, "-i", "0",
                    "--connect-timeout", "3000", "-C", str(r.flow.cc)]
        elif r.flow.kind == "udp":
            argv = ["iperf3", "-c", r.key[0], "-p", str(r.key[1]), "-R", "-u", "-b", str(r.flow.rate_bps),
                    "-l", "1200", "-t", secs, "-i", "0", "--connect-timeout", "3000"]
        else:
            server = registry().competing_quic(self.measured_server)
            url = server.url(objects.path_for(QUIC_OBJECT_BYTES))
            one = (f'exec -a {name} gtlsclient --quiet --exit-on-first-stream-close --cc={r.flow.cc} '
                   f'--timeout={secs}s {server.host} {server.port} {url}')
            argv = ["bash", "-c", f"while :; do ( {one} ) >/dev/null 2>&1; sleep 0.05; done"]
        r.proc = docker.Stream(docker.exec_args(config.CLIENT_CONTAINER, _named(name, argv)),
                               deadline_s=docker.RUN_SCOPED_DEADLINE_S, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        r.started_s = offset_s

    # --- after the transfer ----------------------------------------------------------------------------------
    def read_cc(self) -> None:
        """The TCP congestion control each iperf3 flow's server socket actually uses (ss -ti in the server)."""
        tcp = [r for r in self.running if r.flow.kind == "tcp" and r.proc is not None]
        if not tcp:
            return
        try:
            out = _exec(config.SERVER_CONTAINER, ["ss", "-Htin", "state", "established"])
        except EnvironmentProblem:  # DockerError, ExecTimeout, ...
            return
        for r in tcp:
            r.cc_seen = ",".join(sorted(cc_of_port(out, r.key[1]))) or None

    def stop(self) -> None:
        """Every background process, the probe and the capture stopped (also after Ctrl-C); idempotent. A capture that
        had already ended (something else stopped tcpdump in the router) makes the measurement unsound: a problem."""
        if self.capture is not None and self.capture.poll() is not None:
            self.problems.append("the capture of the competing flows ended before the transfer did (another process "
                                 "stopped tcpdump in the router?): the per-flow figures would be wrong")
            self.lab_problem = True
        with contextlib.suppress(EnvironmentProblem):
            _exec(config.CLIENT_CONTAINER, ["pkill", "-f", f"qla-{self.tag}-flow"], timeout_s=10)
        with contextlib.suppress(EnvironmentProblem):
            _exec(config.CLIENT_CONTAINER, ["pkill", "-INT", "-f", f"qla-{self.tag}-probe"], timeout_s=10)
        with contextlib.suppress(EnvironmentProblem):
            _exec(config.SERVER_CONTAINER, ["pkill", "-f", f"qla-{self.tag}-srv"], timeout_s=10)
        with contextlib.suppress(EnvironmentProblem):
            router.try_run("pkill", "-INT", "-f", f"qla-{self.tag}-cap")
        for r in self.running:
            if r.proc is not None:
                _, err = r.proc.finish(grace_s=5)
                if err and "error" in err.lower() and "interrupt" not in err.lower():
                    r.error = " ".join(err.split())[:200]
        if self.capture is not None:
            self.capture.finish(grace_s=5)

    def probe_rtts_ms(self) -> list[float]:
        if self.probe is None:
            return []
        out, _ = self.probe.finish(grace_s=5)
        return [float(x) for x in re.findall(r"time=([\d.]+) ms", out or "")]

    def read_capture(self) -> bytes:
        if not self.capture_path:
            return b""
        try:
            return base64.b64decode(router.run("base64", "-w0", self.capture_path))
        except EnvironmentProblem:
            return b""
        finally:
            router.try_run("rm", "-f", self.capture_path)

    def summary(self, zero_unix: float) -> tuple[dict[str, Any], float | None]:
        """The `competing` JSON and Jain's index; call after stop()."""
        data = self.read_capture()
        try:
            packets = read_pcap(data) if len(data) >= 24 else []
        except PcapError as e:
            packets = []
            self.problems.append(f"capture unreadable: {e}")
        names = {self.measured_key: "measured"} | {r.key: r.name for r in self.running}
        series = fairness.split_flows(packets, names, zero_unix)
        flows = [series["measured"], *(series[r.name] for r in self.running)]
        fair = fairness.fairness(flows)
        end = max((f.last_s or 0.0) for f in flows) if flows else 0.0
        width = fairness.bin_width(end)
        rtts = self.probe_rtts_ms()
        doc: dict[str, Any] = {
            "flows": [],
            "shared_interval_s": [round(x, 3) for x in fair.interval] if fair.interval else None,
            "bin_s": width,
            "probe": {"interval_s": PROBE_INTERVAL_S, "samples": len(rtts),
                      "rtt_ms_p50": _pct(rtts, 50), "rtt_ms_p95": _pct(rtts, 95)},
        }
        by_name = {r.name: r for r in self.running}
        for f in flows:
            r = by_name.get(f.name)
            doc["flows"].append({
                "name": f.name, "kind": r.flow.kind if r else "measured", "spec": r.flow.text if r else "",
                "cc": (r.cc_seen or r.flow.cc) if r else None, "cc_asked": r.flow.cc if r else None,
                "start_s": round(r.started_s, 3) if r and r.started_s is not None else None,
                "first_s": _r(f.first_s), "last_s": _r(f.last_s), "bytes": f.bytes,
                "mbit_shared": _r(fair.mbit.get(f.name)), "share": _r(fair.share.get(f.name)),
                "intervals_mbit": fairness.intervals_mbit(f, end, width) if f.times else [],
                **({"error": r.error} if r and r.error else {}),
            })
        if self.problems:
            doc["problems"] = self.problems
        return doc, fair.jain


def cc_of_port(ss_out: str, port: int) -> set[str]:
    """Congestion control names of the sockets on local port `port` in `ss -Htin` output (a socket line, then an
    indented line of TCP info starting with the algorithm). iperf3's control connection uses the namespace's
    default, its data connection the one asked for: both are reported."""
    seen: set[str] = set()
    current = False
    for line in ss_out.splitlines():
        if line[:1].strip():  # a socket line
            fields = line.split()
            current = any(f.endswith(f":{port}") for f in fields[2:4]) if len(fields) >= 4 else False
        elif current:
            m = re.match(r"\s*(cubic|bbr|reno|bbr2|dctcp|vegas)\b", line)
            if m:
                seen.add(m.group(1))
    return seen


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _pct(xs: list[float], q: int) -> float | None:
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    return round(quantile(xs, q / 100), 3)
