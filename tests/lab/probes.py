"""Measurement helpers for the integration tests: pings, UDP probes and captures through the real router."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from lab import config, docker, quantiles
from lab.evidence.pcap import PROTO_UDP, read_pcap
from lab.link import linkem, router
from lab.link.model import Link
from tests import timing

PROBE_PORT = 9999


def client(*cmd: str) -> str:
    return docker.exec_in(config.CLIENT_CONTAINER, list(cmd))


def ping_rtts_ms(count: int, interval_s: float, target: str = config.SERVER_IP) -> list[float]:
    out = client("ping", "-n", "-c", str(count), "-i", f"{interval_s:g}", "-W", "5", target)
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


def bulk_tcp_rtts(seconds: float, interval_s: float) -> tuple[list[float], float]:
    """Ping RTTs (ms, one every interval_s for `seconds`) while iperf3 sends bulk TCP (cubic) from the server to the
    client, and its goodput (bit/s).

    Both run in one shell in the client container: the pings start 2 s into the flow (past slow start) with no
    `docker exec` start-up between them, and the flow lasts longer than the pings by a margin that grows with
    QUICLAB_SLOW (config.deadline). A flow that ended before the last ping is a failed measurement, not a sample of
    the idle link: the pings after it would measure the empty queue (a VM run under TCG, 2026-11-26, gave a median
    queueing delay of 20 ms of a full 96 ms queue that way)."""
    count = int(seconds / interval_s)
    # ping keeps its interval only as well as the kernel's timers do: 300 pings at 20 ms took 7.1 s, not 6, on a
    # host whose kernel rounds them up (2026-11-26), and the 9 s flow ended before them
    flow_s = seconds * 1.5 + 2 + config.deadline(1.0)
    script = (f"o=$(mktemp); iperf3 -c {config.SERVER_IP} -R -C cubic -t {flow_s:g} -f m --connect-timeout 3000 "
              f">\"$o\" 2>&1 & p=$!; sleep 2; ping -n -c {count} -i {interval_s:g} -W 5 {config.SERVER_IP}; "
              "kill -0 $p 2>/dev/null || echo QUICLAB-FLOW-ENDED-EARLY; wait $p; cat \"$o\"; rm -f \"$o\"")
    out = client("sh", "-c", script)
    assert "QUICLAB-FLOW-ENDED-EARLY" not in out, \
        f"the bulk flow ({flow_s:g} s) ended before the {count} pings did: no RTT under load to judge\n{out[-1500:]}"
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
    m = re.findall(r"([\d.]+) Mbits/sec.*receiver", out)
    return rtts, float(m[-1]) * 1e6 if m else 0.0


def ping_timed(duration_s: float, interval_s: float = 0.002) -> list[tuple[float, float]]:
    """(unix time the reply arrived, rtt in s) for pings sent every interval for duration."""
    count = int(duration_s / interval_s)
    out = client("ping", "-n", "-D", "-c", str(count), "-i", f"{interval_s:g}", "-W", "2", config.SERVER_IP)
    return [(float(ts), float(rtt) / 1000) for ts, rtt in re.findall(r"\[([\d.]+)\].*time=([\d.]+) ms", out)]


def still_in_force(link: Link) -> None:
    """The lab is shared: if another user changed the link while a timing check measured, the measurement is not
    one of this link, so the test skips for a busy host (counted against QUICLAB_TIMING_SKIP_LIMIT: tests/timing.py),
    saying so."""
    timing.record()
    if linkem.current() != link:
        timing.skip_busy("another user of the lab changed the link during this measurement (linkem's config in force "
                         "is no longer the test's): rerun when the lab is not in use")


def median(xs: list[float]) -> float:
    return quantiles.median(xs)


def lower_quartile(xs: list[float]) -> float:
    """The lower quartile as the lab's calibration takes it (lab/quantiles.py)."""
    return quantiles.quantile(xs, 0.25)


#: udp_burst sends this many datagrams, then sleeps 1 ms: at most ~20,000 a second, which the router's tcpdump keeps
#: up with on a busy host (a bash `echo >/dev/udp` loop took minutes for 100,000 in an emulated VM).
BURST_PER_MS = 20


def udp_burst(n: int, port: int = PROBE_PORT, dst: str = config.SERVER_IP, first: int = 0) -> None:
    """Send n UDP datagrams carrying sequence numbers first..first+n-1 ("i\\n") from the client to the server from
    one socket (perl-base, in every Debian image), paced at BURST_PER_MS per millisecond."""
    # an unconnected socket: the server's ICMP port-unreachable answers cannot fail later sends (a connected one's
    # would with ECONNREFUSED); a send that fails anyway stops the burst with an error instead of looking like loss
    client("perl", "-MSocket", "-e",
           f'socket(my $s, PF_INET, SOCK_DGRAM, 0) or die "socket: $!"; '
           f'my $a = sockaddr_in({port}, inet_aton("{dst}"));'
           f'for my $i ({first} .. {first + n - 1}) {{ send($s, "$i\\n", 0, $a) or die "send #$i: $!"; '
           f'select(undef, undef, undef, 0.001) if $i % {BURST_PER_MS} == {BURST_PER_MS - 1}; }}')


MARKER_PORT = PROBE_PORT - 1


@dataclass
class Capture:
    payloads: list[bytes] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)

    def seqs(self, port: int = PROBE_PORT) -> list[int]:
        return [int(p.strip()) for p, dport in zip(self.payloads, self.ports, strict=True)
                if dport == port and p.strip().isdigit()]


def parse_pcap(data: bytes) -> Capture:
    """The UDP datagrams of a capture (lab/evidence/pcap.py reads it): payloads, destination ports, timestamps."""
    cap = Capture()
    if len(data) < 24:  # tcpdump has not written its file header yet
        return cap
    for p in read_pcap(data):
        if p.proto == PROTO_UDP:
            cap.payloads.append(p.payload)
            cap.ports.append(p.dport)
            cap.times.append(p.time)
    return cap


def _read_pcap(path: str) -> Capture:
    return parse_pcap(base64.b64decode(router.run("base64", "-w0", path)))


@contextmanager
def capture(iface: str, port: int = PROBE_PORT) -> Iterator[Capture]:
    """tcpdump in the router on `iface` (UDP to `port`) while the block runs; the Capture fills in at the end.

    The block starts only once the capture provably sees packets: marker datagrams to MARKER_PORT are sent until
    one shows up in the file (markers are excluded from `seqs()`)."""
    path = "/tmp/quiclab-test.pcap"
    router.try_run("pkill", "-INT", "tcpdump")
    router.run("rm", "-f", path)
    docker.client().container.execute(
        config.ROUTER_CONTAINER,
        ["tcpdump", "-i", iface, "-n", "-U", "--immediate-mode", "-s", "200", "-w", path,
         "udp", "and", "(", "dst", "port", str(port), "or", "dst", "port", str(MARKER_PORT), ")"], detach=True)
    deadline = time.monotonic() + config.deadline(20)
    while True:
        udp_burst(1, MARKER_PORT)
        time.sleep(0.1)
        code, _ = router.try_run("test", "-s", path)
        if code == 0 and MARKER_PORT in _read_pcap(path).ports:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("tcpdump in the router never saw the marker datagrams")
    result = Capture()
    try:
        yield result
    finally:
        time.sleep(config.deadline(0.5))  # the block's last packets reach the capture (longer under emulation)
        router.try_run("pkill", "-INT", "tcpdump")
        time.sleep(config.deadline(0.3))
        parsed = _read_pcap(path)
        result.payloads, result.times, result.ports = parsed.payloads, parsed.times, parsed.ports


def iface_tx(iface: str) -> tuple[int, int]:
    """(bytes, packets) the router sent on an interface (kernel counters, independent of linkem)."""
    b = int(router.run("cat", f"/sys/class/net/{iface}/statistics/tx_bytes"))
    p = int(router.run("cat", f"/sys/class/net/{iface}/statistics/tx_packets"))
    return b, p
