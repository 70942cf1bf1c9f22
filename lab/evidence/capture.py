"""Per-run evidence, opt-in (`--capture pcap,keylog,qlog`), stored beside the run:

- pcap: tcpdump in the router on both of its lab interfaces, whole packets: `client-side.pcap` is what the link
  delivered to (and took from) the client, `server-side.pcap` the same at the server's side.
- keylog: the client's TLS secrets (SSLKEYLOGFILE, NSS key log format: curl/OpenSSL and gtlsclient/GnuTLS both
  write it), so Wireshark/tshark decrypt TLS and QUIC in those captures: `keys.log`.
- qlog: from clients that write it (registry `writes_qlog`) as `client-*.sqlog`, and from servers whose registry
  entry has a `qlog` instance (gtlsserver): for the run, a second server process with QLOGDIR set serves the
  same objects on another port, and the client fetches from it: `server-*.sqlog`.

Capturing costs time (tcpdump start-up, copying files out), so it is off unless asked for.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lab import config, docker
from lab.endpoints import instances
from lab.endpoints.registry import Implementation, registry
from lab.errors import EnvironmentProblem, UsageError
from lab.link import router

KINDS = ("pcap", "keylog", "qlog")
_ROUTER_DIR = "/tmp/quiclab-evidence"
_CLIENT_DIR = "/tmp/quiclab-evidence"
#: what went wrong with a run's captures (e.g. tcpdump's kernel drops), kept beside them when anything did
CAPTURE_PROBLEMS = "capture-problems.txt"
_START_TIMEOUT_S = instances.START_TIMEOUT_S
_SERVER_QLOG_CLOSE_S = 0.5


def parse_kinds(text: str | None) -> tuple[str, ...]:
    """`pcap,keylog,qlog` (any subset, or "all"/"none") -> the kinds, in a fixed order."""
    if text is None:
        return ()
    items = [x.strip().lower() for x in text.split(",") if x.strip()]
    if items in (["none"], ["off"]):
        return ()
    if items == ["all"]:
        return KINDS
    bad = [x for x in items if x not in KINDS]
    if bad:
        raise UsageError(f"invalid --capture {bad[0]!r}: allowed are {', '.join(KINDS)} (comma list), all, none")
    return tuple(k for k in KINDS if k in items)


@dataclass
class Evidence:
    """What one run captured: files relative to `root`, and where the client should write its own."""

    root: Path
    folder: Path
    client_env: dict[str, str] = field(default_factory=dict)
    server_port: int | None = None  # where the client fetches from instead (a server's qlog instance)
    files: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    kinds: tuple[str, ...] = ()  # what is captured (pcap, keylog, qlog)

    def relative(self) -> list[str]:
        return [str(f.relative_to(self.root)) for f in self.files]

    def find(self, name: str) -> Path | None:
        return next((f for f in self.files if f.name == name), None)


class _Tcpdump:
    """One tcpdump in the router writing a whole-packet capture of one interface."""

    def __init__(self, iface: str, path: str, snap: int = 0,
                 bpf: tuple[str, ...] = ("ip", "and", "(", "tcp", "or", "udp", ")")) -> None:
        self.iface, self.path = iface, path
        # Stopped (pkill -INT in the router, then stop()) when the run ends; the deadline is only a backstop
        # (docker.RUN_SCOPED_DEADLINE_S: far longer than any run).
        self.proc = docker.Stream(
            # -B: a 32 MiB capture buffer (KiB): a sender's slow-start burst at veth speed overflowed the default
            # 2 MiB (tcpdump said the kernel dropped packets; the explanation then saw drops that never happened)
            docker.exec_args(config.ROUTER_CONTAINER, ["tcpdump", "-i", iface, "-n", "-s", str(snap), "-B", "32768",
                                                       "-U", "--immediate-mode", "-w", path, *bpf]),
            deadline_s=docker.RUN_SCOPED_DEADLINE_S, stderr=subprocess.PIPE, text=True)

    def wait_listening(self, deadline: float) -> None:
        while (line := self.proc.line(deadline, "stderr")) is not None:
            if "listening on" in line:
                return
        raise EnvironmentProblem(f"tcpdump in the router did not start on {self.iface}")

    def stop(self) -> int:
        """Wait for tcpdump to exit (after SIGINT); returns how many packets it says the kernel dropped."""
        _, tail = self.proc.finish(grace_s=5)
        m = re.search(r"(\d+) packets? dropped by kernel", tail or "")
        return int(m.group(1)) if m else 0


def _copy_out(container: str, src: str, dest: Path) -> bool:
    try:
        docker.copy_from(container, src, dest)
    except docker.DockerError:
        return False
    return dest.exists()


@contextmanager
def collecting(kinds: tuple[str, ...], root: Path, folder: Path, client_name: str, client_container: str,
               server: Implementation | None = None, server_env: dict[str, str] | None = None) -> Iterator[Evidence]:
    """Capture while the block runs a transfer; the block passes `ev.client_env` to the client and fetches from
    `ev.server_port` if set. Files land in `folder` (under `root`, the folder the paths are relative to).
    `server_env` goes to a server qlog instance (e.g. CC: the run's sender congestion control, lab/run/sender.py)."""
    ev = Evidence(root=root, folder=folder, kinds=kinds)
    if not kinds:
        yield ev
        return
    folder.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:12]
    client_dir = f"{_CLIENT_DIR}/{tag}"
    dumps: list[tuple[_Tcpdump, str]] = []
    if "keylog" in kinds:
        ev.client_env["SSLKEYLOGFILE"] = f"{client_dir}/keys.log"
    server_qlog: str | None = None
    try:
        if "qlog" in kinds:
            if registry().client(client_name).writes_qlog:  # (the registry's `writes_qlog`)
                ev.client_env["QLOGDIR"] = f"{client_dir}/qlog"
            else:
                ev.problems.append(f"{client_name} writes no qlog")
            if server is not None and server.qlog is not None:
                server_qlog = f"{_CLIENT_DIR}/{tag}/server-qlog"
                _start_qlog_server(server, server_qlog, server_env or {})
                ev.server_port = server.qlog.port
        if ev.client_env:
            # curl 8.23 writes qlog only into a QLOGDIR that exists (gtlsclient's wrapper makes its own)
            docker.exec_in(client_container, ["mkdir", "-p", client_dir, *(
                [ev.client_env["QLOGDIR"]] if "QLOGDIR" in ev.client_env else [])])
        if "pcap" in kinds:
            ifs = router.interfaces()
            router.run("mkdir", "-p", _ROUTER_DIR)
            deadline = time.monotonic() + config.deadline(_START_TIMEOUT_S)
            for side, iface in (("client-side", ifs.client_side), ("server-side", ifs.server_side)):
                dumps.append((_Tcpdump(iface, f"{_ROUTER_DIR}/{tag}-{side}.pcap"), f"{side}.pcap"))
            for d, _ in dumps:
                d.wait_listening(deadline)
        yield ev
    finally:  # also after a failed start or Ctrl-C: nothing of the capture is left running
        if dumps:
            time.sleep(0.05)  # the last packets of the transfer reach the capture file
            ev.problems += _stop_dumps(tag, dumps)
            for d, name in dumps:
                if _copy_out(config.ROUTER_CONTAINER, d.path, folder / name):
                    ev.files.append(folder / name)
                else:
                    ev.problems.append(f"no {name} from the router")
            router.try_run("rm", "-f", *(d.path for d, _ in dumps))
        if ev.client_env:
            _collect_dir(ev, client_container, client_dir, folder, "client-")
        if ev.problems and dumps:  # kept beside the captures: `quiclab explain` refuses an incomplete capture
            (folder / CAPTURE_PROBLEMS).write_text("\n".join(ev.problems) + "\n", encoding="utf-8")
            ev.files.append(folder / CAPTURE_PROBLEMS)
        if server is not None and server_qlog is not None:
            time.sleep(_SERVER_QLOG_CLOSE_S)  # the connection's closing period ends; the server closes its qlog
            with contextlib.suppress(docker.DockerError):
                docker.exec_in(server.container, ["pkill", "-INT", "-f", "--", f"--qlog-dir={server_qlog}"])
            _collect_dir(ev, server.container, server_qlog, folder, "server-")


#: The headers of the lab's TCP packets with every TCP option (Ethernet 14, IPv4 20, TCP up to 60): what the
#: calibration reads of a capture (lab/calibrate/pcapfile.py takes the payload's length from the IP header).
HEADERS_SNAP = 96


@contextmanager
def client_side_tcp(dest: Path, port: int) -> Iterator[None]:
    """The TCP packets to and from `port` as the link delivers them to the client (the router's client-side
    interface: what tcpdump on the client would see), headers only, into `dest` while the block runs: a user's
    capture of a download (the calibration benchmark's). Stopped and copied out also after a failure or Ctrl-C; a
    capture the kernel dropped packets of is an EnvironmentProblem (the arrivals would miss them)."""
    tag = uuid.uuid4().hex[:12]
    router.run("mkdir", "-p", _ROUTER_DIR)
    dump = _Tcpdump(router.interfaces().client_side, f"{_ROUTER_DIR}/{tag}-user.pcap", HEADERS_SNAP,
                    ("tcp", "port", str(port)))
    try:
        dump.wait_listening(time.monotonic() + config.deadline(_START_TIMEOUT_S))
        yield
    finally:
        time.sleep(0.05)  # the last packets reach the capture file
        problems = _stop_dumps(tag, [(dump, dest.name)])
        copied = _copy_out(config.ROUTER_CONTAINER, dump.path, dest)
        router.try_run("rm", "-f", dump.path)
    if problems or not copied:
        raise EnvironmentProblem(problems[0] if problems else f"no {dest.name} from the router")


def _stop_dumps(tag: str, dumps: list[tuple[_Tcpdump, str]]) -> list[str]:
    router.try_run("pkill", "-INT", "-f", f"{_ROUTER_DIR}/{tag}-")
    problems = []
    for d, name in dumps:
        dropped = d.stop()
        if dropped:
            problems.append(f"{name}: tcpdump says the kernel dropped {dropped} packets (the capture is incomplete)")
    return problems


def _start_qlog_server(server: Implementation, qlog_dir: str, env: dict[str, str]) -> None:
    """Start the server's qlog instance (registry `qlog`) writing into `qlog_dir`; wait until it listens."""
    assert server.qlog is not None
    docker.exec_in(server.container, ["mkdir", "-p", qlog_dir])
    instances.start(server.container, server.qlog.command, server.qlog.port, {**env, "QLOGDIR": qlog_dir},
                    f"{server.name}'s qlog instance")


def _collect_dir(ev: Evidence, container: str, src: str, folder: Path, qlog_prefix: str) -> None:
    """Copy a container's evidence directory out (qlog files get `qlog_prefix`), then delete it there."""
    staging = folder / f".{qlog_prefix}staging"
    if staging.exists():
        shutil.rmtree(staging)
    if _copy_out(container, src, staging):
        for f in sorted(p for p in staging.rglob("*") if p.is_file()):
            target = folder / (f.name if f.name == "keys.log" else qlog_prefix + f.name)
            f.replace(target)
            ev.files.append(target)
        shutil.rmtree(staging, ignore_errors=True)
    with contextlib.suppress(docker.DockerError):
        docker.exec_in(container, ["rm", "-rf", src])
    if qlog_prefix == "client-" and "SSLKEYLOGFILE" in ev.client_env and ev.find("keys.log") is None:
        ev.problems.append("the client wrote no TLS key log")
