"""`quiclab run`: one verified transfer per protocol over the link in force, as a one-point plan run by the sweep's
runner (lab/run/runner.py one_attempt): the same support check, probes and columns as a sweep's runs.csv row."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from lab import config, lab, lock, terminal
from lab.endpoints import check_server, get_client
from lab.endpoints.registry import help_text, registry
from lab.endpoints.sender_cc import parse_cc
from lab.errors import UsageError, VerificationError
from lab.evidence.capture import CAPTURE_PROBLEMS, parse_kinds
from lab.plan.checks import validate
from lab.plan.plan import PlannedRun, plan
from lab.protocols import Protocol, parse_protocol
from lab.results.schema import RunRecord
from lab.run import environment, runner
from lab.run.lab_session import cc_by_implementation
from lab.run.transfer import stop_clients
from lab.sizes import format_size, parse_size


def _ms(v: float | None) -> str:
    return f"{v * 1000:.1f}" if v is not None else "-"


def _mbps(v: float | None) -> str:
    return f"{v / 1e6:.2f}" if v is not None else "-"


def _row(r: RunRecord) -> list[terminal.Cell]:
    used = f"HTTP/{r.http_version}" if r.http_version else "?"
    verdict: terminal.Cell
    if r.status == "unsupported":
        used = "-"
        verdict = Text.assemble(terminal.styled("unsupported", "yellow"), " ",
                                terminal.plain(r.failure.removeprefix("unsupported: ")))
    elif r.status == "ok":
        verdict = terminal.styled("ok", "green")
    else:
        verdict = Text.assemble(terminal.styled("FAILED", "red"), " ", terminal.plain(r.failure))
    return [Protocol(r.protocol).label, used, terminal.plain(r.cc_sender or "-"), str(r.bytes), _ms(r.handshake_s),
            _ms(r.ttfb_s), _ms(r.total_s), _mbps(r.goodput_bps), verdict]


def _runs(protocols: list[Protocol], size: str, client: str, server: str, sender_cc: str | None,
          client_cc: str | None, timeout_s: float, kinds: tuple[str, ...]) -> list[PlannedRun]:
    """The one-point plan: one run per protocol, in the order asked."""
    s = validate({"name": "run", "sizes": [size], "protocols": [p.value for p in protocols], "clients": [client],
                  "servers": [server], "repeats": 1, "timeout": timeout_s, "capture": list(kinds),
                  **({"cc": sender_cc} if sender_cc is not None else {}),
                  **({"client_quic_cc": {client: client_cc}} if client_cc is not None else {})}, "quiclab run")
    by = {r.protocol: r for r in plan(s)}
    return [by[p] for p in protocols]


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        protocol: Annotated[str, typer.Option("--protocol", "-p", help="h1, h2, h3 or a comma list.")] = "h1,h2,h3",
        size: Annotated[str, typer.Option("--size", "-s", help="Object size, e.g. 10kB, 1MB, 10MiB, 12345.")] = "1MB",
        client: Annotated[str, typer.Option(help=f"Client implementation: {help_text('client')} (see "
                                                 "docs/implementations.md).")] = "curl",
        server: Annotated[str, typer.Option(help=f"Server implementation: {help_text('server')}.")] = "nginx",
        sender_cc: Annotated[str | None, typer.Option(
            "--sender-cc", help="The sender's (for downloads the server's) congestion control: reno, cubic, bbr or "
                                "native (the server's own, the default). TCP: set in the server's network namespace; "
                                f"QUIC: a server instance per algorithm ({help_text('sender_quic_cc')}); fixed "
                                f"stacks ({help_text('fixed_quic_cc')}) run only native.")] = None,
        cc: Annotated[str | None, typer.Option(
            "--client-quic-cc", "--cc", help="The CLIENT's QUIC congestion control, for clients that can choose it "
                                             f"({help_text('client_quic_cc')}); hardly matters for downloads "
                                             "(--cc is its old name).")] = None,
        timeout: Annotated[float | None, typer.Option(help="Per-transfer timeout in seconds.")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="One JSON object per transfer on stdout.")] = False,
        capture: Annotated[str | None, typer.Option(help="Evidence to keep: pcap,keylog,qlog (any subset, or all); "
                                                         "written to results/runs/<time>-<client>-<server>/.")]
        = None,
    ) -> None:
        """Run verified transfers through the router: one per protocol."""
        protocols = [parse_protocol(p) for p in protocol.split(",") if p.strip()]
        if not protocols:
            raise UsageError("empty --protocol: give h1, h2, h3 or a comma list of them")
        nbytes = parse_size(size)
        adapter = get_client(client)
        check_server(server)
        if cc is not None:
            registry().check_quic_cc(client, cc, "--client-quic-cc")
        want_cc = parse_cc(sender_cc, "--sender-cc") if sender_cc is not None else None
        timeout_s = timeout if timeout is not None else config.timeout_s()
        if not 0 < timeout_s <= config.MAX_TIMEOUT_S:
            raise UsageError(f"invalid --timeout {timeout_s:g}: allowed is more than 0 and at most "
                             f"{config.MAX_TIMEOUT_S:g} seconds")
        kinds = parse_kinds(capture)
        lab.require_up()
        lab.ensure_available([client], [server])
        runs = _runs(protocols, size, adapter.name, server, want_cc, cc, timeout_s, kinds)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        root = config.ROOT / "results" / "runs" / f"{stamp}-{adapter.name}-{server}"
        records: list[RunRecord] = []
        with lock.holding():  # one measuring or shaping command per lab at a time
            ctx = runner.Context(
                sweep="run", shaper="auto", timeout_for=lambda _r: timeout_s,
                cc=cc_by_implementation({"implementations": environment.implementations(
                    [adapter.name, server], {adapter.name: cc} if cc else {})}),
                quic_cc={adapter.name: cc} if cc else {}, capture=kinds, folder=root if kinds else None,
                host_guard="flag", link_in_force=True)
            try:
                for run in runs:
                    with terminal.status(f"{run.protocol.label} {format_size(nbytes)} with {adapter.name} → "
                                         f"{server}"):
                        rec, _ = runner.one_attempt(run, ctx)
                    records.append(rec)
                    _warn(rec, root)
                    if json_out:
                        terminal.raw(json.dumps(dataclasses.asdict(rec)))
            except KeyboardInterrupt:
                stop_clients()  # the transfer must not go on in the client container; the link stays as it is
                raise
            finally:
                ctx.sender.close()
        if not json_out:
            terminal.table(
                f"{format_size(nbytes)} object ({nbytes} bytes), {adapter.name} → {server}, through the router",
                ["asked", "used", "sender cc", "bytes", "handshake ms", "TTFB ms", "total ms", "goodput Mbit/s",
                 "check"],
                [_row(r) for r in records],
                right=["bytes", "handshake ms", "TTFB ms", "total ms", "goodput Mbit/s"], wrap=["check"],
            )
        if kinds and not json_out:
            for r in records:
                pg = f", pcap goodput {r.pcap_goodput_bps / 1e6:.2f} Mbit/s" if r.pcap_goodput_bps else ""
                files = [str(root / f) for f in r.evidence.split()]
                terminal.info(f"{Protocol(r.protocol).label} evidence{pg}: " + (" ".join(files) or "none"))
        if all(r.status == "unsupported" for r in records):
            raise UsageError("; ".join(f"{Protocol(r.protocol).label}: {r.failure}" for r in records))
        failed = [r for r in records if r.status not in ("ok", "unsupported")]
        if failed:
            raise VerificationError("; ".join(f"{Protocol(r.protocol).label}: {r.failure}" for r in failed))


def _warn(rec: RunRecord, root: Path) -> None:
    """What the run's capture lacked (kept beside it as capture-problems.txt) and losses the client itself made."""
    label = Protocol(rec.protocol).label
    for f in rec.evidence.split():
        if Path(f).name == CAPTURE_PROBLEMS:
            for problem in (root / f).read_text(encoding="utf-8").splitlines():
                terminal.warning(f"{label}: {problem}")
    if rec.client_rcvbuf_drops:
        terminal.warning(f"{label}: the client's own UDP receive buffer dropped {rec.client_rcvbuf_drops} datagrams "
                         "(losses the link did not make; raise net.core.rmem_default on the host, docs/link.md)")
