from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from lab import config, lab, lock, terminal
from lab.endpoints import check_server, get_client
from lab.endpoints.base import ClientAdapter
from lab.endpoints.registry import Implementation, help_text, registry
from lab.endpoints.sender_cc import parse_cc, resolve
from lab.errors import UsageError, VerificationError
from lab.evidence.capture import Evidence, collecting, parse_kinds
from lab.evidence.goodput import pcap_goodput
from lab.models import TransferResult
from lab.protocols import Protocol, parse_protocol
from lab.run.sender import SenderControl
from lab.run.transfer import run_transfer, stop_clients, unsupported_result
from lab.sizes import format_size, parse_size


def _ms(v: float | None) -> str:
    return f"{v * 1000:.1f}" if v is not None else "-"


def _mbps(v: float | None) -> str:
    return f"{v / 1e6:.2f}" if v is not None else "-"


def _row(r: TransferResult) -> list[terminal.Cell]:
    used = f"HTTP/{r.http_version}" if r.http_version else "?"
    verdict: terminal.Cell
    if r.unsupported:
        used = "-"
        verdict = Text.assemble(terminal.styled("unsupported", "yellow"), " ",
                                terminal.plain(r.failure.removeprefix("unsupported: ")))
    elif r.ok:
        verdict = terminal.styled("ok", "green")
    else:
        verdict = Text.assemble(terminal.styled("FAILED", "red"), " ", terminal.plain(r.failure))
    return [r.protocol.label, used, terminal.plain(r.cc_sender or "-"), str(r.bytes), _ms(r.handshake_s), _ms(r.ttfb_s),
            _ms(r.total_s), _mbps(r.goodput_bps), verdict]


def _one(adapter: ClientAdapter, server: Implementation, p: Protocol, nbytes: int, timeout_s: float,
         client_cc: str | None, sender_cc: str | None, kinds: tuple[str, ...], folder: Path,
         senders: SenderControl) -> tuple[TransferResult, Evidence]:
    """One verified transfer with the sender's congestion control in force (and read back)."""
    plan = resolve(server, p, sender_cc)
    why = registry().unsupported(adapter.name, server.name, p) or plan.reason
    if why:
        return unsupported_result(adapter.name, server.name, p, nbytes, why), Evidence(folder, folder)
    prepared = senders.prepare(server, plan, instance=not (server.qlog and "qlog" in kinds))
    if prepared.unsupported:
        return unsupported_result(adapter.name, server.name, p, nbytes, prepared.unsupported), Evidence(folder, folder)
    root = folder.parent
    try:
        with terminal.status(f"{p.label} {format_size(nbytes)} with {adapter.name} → {server.name}"), \
                collecting(kinds, root, folder, adapter.name, adapter.container, server, prepared.server_env) as ev:
            port = ev.server_port or prepared.port
            result = run_transfer(adapter, server.name, p, nbytes, timeout_s, cc=client_cc, env=ev.client_env,
                                  port=port)
            result.cc_sender, result.cc_sender_source = senders.read_back(server, prepared, port)
    except KeyboardInterrupt:
        stop_clients()  # the transfer must not go on in the client container; the link stays as it is
        raise
    if kinds and result.ok:
        result.pcap_goodput_bps = pcap_goodput(ev, server.name, p, nbytes, port)
    return result, ev


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
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        root = config.ROOT / "results" / "runs" / f"{stamp}-{adapter.name}-{server}"
        results = []
        impl = check_server(server)
        with lock.holding(), SenderControl() as senders:  # one measuring or shaping command per lab at a time
            for p in protocols:
                result, ev = _one(adapter, impl, p, nbytes, timeout_s, cc, want_cc, kinds, root / p.value, senders)
                if kinds:
                    result.evidence = [str(root / f) for f in ev.relative()]
                    for problem in ev.problems:
                        terminal.warning(f"{p.label}: {problem}")
                results.append(result)
                if result.client_rcvbuf_drops:
                    terminal.warning(f"{p.label}: the client's own UDP receive buffer dropped "
                                     f"{result.client_rcvbuf_drops} datagrams (losses the link did not make; raise "
                                     "net.core.rmem_default on the host, docs/link.md)")
                if json_out:
                    terminal.raw(result.model_dump_json())
        if not json_out:
            terminal.table(
                f"{format_size(nbytes)} object ({nbytes} bytes), {adapter.name} → {server}, through the router",
                ["asked", "used", "sender cc", "bytes", "handshake ms", "TTFB ms", "total ms", "goodput Mbit/s",
                 "check"],
                [_row(r) for r in results],
                right=["bytes", "handshake ms", "TTFB ms", "total ms", "goodput Mbit/s"], wrap=["check"],
            )
        if kinds and not json_out:
            for r in results:
                pg = f", pcap goodput {r.pcap_goodput_bps / 1e6:.2f} Mbit/s" if r.pcap_goodput_bps else ""
                terminal.info(f"{r.protocol.label} evidence{pg}: " + (" ".join(r.evidence) or "none"))
        failed = [r for r in results if not r.ok and not r.unsupported]
        if all(r.unsupported for r in results):
            raise UsageError("; ".join(f"{r.protocol.label}: {r.failure}" for r in results))
        if failed:
            raise VerificationError("; ".join(f"{r.protocol.label}: {r.failure}" for r in failed))
