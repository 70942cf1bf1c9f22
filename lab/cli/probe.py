"""`quiclab probe INPUT... --out FOLDER`: a user's own measurements of a path -> a measurement folder
(lab/calibrate/probe.py; docs/calibrate.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lab import terminal
from lab.errors import UsageError
from lab.quantiles import median

if TYPE_CHECKING:
    from lab.calibrate.measurements import Flow


def _mbit(f: Flow) -> str:
    return f"{f.bytes * 8 / f.duration_s / 1e6:.2f}" if f.duration_s > 0 else "-"


def _rtt(f: Flow) -> str:
    return f"{median(r for _, r in f.rtt) * 1000:.1f}" if f.rtt else "-"


def register(app: typer.Typer) -> None:
    @app.command()
    def probe(
        inputs: Annotated[list[Path], typer.Argument(help="Measurements of one path: pcap/pcapng captures of bulk "
                                                          "downloads, ping or irtt output, iperf3 --json runs, "
                                                          ".flent.gz files (tcp_download, rrul), mahimahi traces.")],
        out: Annotated[Path, typer.Option("--out", help="The measurement folder to write (new, or empty).")],
    ) -> None:
        """Read your own measurements of a path into a measurement folder for `quiclab calibrate`, and say what
        they can and cannot tell about the path."""
        # (imported here: the pcap reader, dpkt, costs every other command's start-up a moment)
        from lab.calibrate import measurements
        from lab.calibrate.probe import probe as read_inputs

        if (out / measurements.FILE).exists():
            raise UsageError(f"--out {out}: already a measurement folder (has {measurements.FILE}): give a new one")
        m = read_inputs(inputs)
        path = measurements.write(out, m)
        if m.flows:
            terminal.table("transfers", ["flow", "file", "way", "cc", "s", "Mbit/s", "RTT p50 ms", "retx"],
                           [[f.label, f.source, f.direction, f.cc or "?", f"{f.duration_s:.1f}", _mbit(f), _rtt(f),
                             "?" if f.retransmits is None else str(f.retransmits)] for f in m.flows],
                           right=["s", "Mbit/s", "RTT p50 ms", "retx"])
        for line in m.can_tell:
            terminal.success(f"can tell {line}")
        for line in m.cannot_tell:
            terminal.warning(f"cannot tell {line}")
        terminal.info(f"wrote {path}; next: quiclab calibrate {out} --out link.toml")
