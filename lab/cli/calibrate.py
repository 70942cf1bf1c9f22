"""`quiclab calibrate MEASUREMENTS --out link.toml`: the first estimates of a link from a measurement folder
(lab/calibrate/estimate.py), written as a scenario file the sweep runs, checked with the scenario loader. The lab
search over candidate links (lab/calibrate/search.py) is not wired to the lab yet (docs/calibrate.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from lab import terminal
from lab.errors import UsageError

if TYPE_CHECKING:
    from lab.calibrate.estimate import Estimate

ESTIMATE_FILE = "estimate.json"


def _rows(e: Estimate) -> list[list[str]]:
    rows = [["base RTT", f"{e.base_rtt_s * 1000:.2f} ms"], ["link rtt", f"{e.rtt_s * 1000:.2f} ms"],
            ["jitter", f"{e.jitter_s * 1000:.2f} ms"]]
    rate = "-" if e.down_rate_bps is None else f"{e.down_rate_bps / 1e6:.3f} Mbit/s"
    rows.append(["downlink rate", rate + (" (trace, mean)" if e.down_trace_ms else "")])
    rows.append(["downlink queue", "default (one BDP)" if e.down_queue_bytes is None
                 else f"{e.down_queue_bytes} B ({(e.queue_delay_s or 0) * 1000:.1f} ms)"])
    loss = ("-" if e.down_loss is None and e.down_loss_upper is None
            else f"{e.down_loss:.4%}" if e.down_loss is not None else f"unknown (at most {e.down_loss_upper:.4%})")
    rows.append(["downlink random loss", loss])
    rows.append(["uplink rate", "unlimited" if e.up_rate_bps is None else f"{e.up_rate_bps / 1e6:.3f} Mbit/s"])
    return rows


def register(app: typer.Typer) -> None:
    @app.command()
    def calibrate(
        folder: Annotated[Path, typer.Argument(help="A measurement folder (quiclab probe ... --out FOLDER).")],
        out: Annotated[Path, typer.Option("--out", help="The scenario file to write (e.g. link.toml); a trace is "
                                                        "written beside it.")],
        rate: Annotated[Literal["auto", "constant", "trace"], typer.Option(
            "--rate", help="The downlink's rate: constant, a trace of the delivery rate, or auto (a trace when the "
                           "rate varies).")] = "auto",
    ) -> None:
        """First estimates of the measured path's link (base RTT, rate or rate trace, queue, random loss, jitter),
        written as a scenario file for `quiclab sweep --scenario FILE`."""
        # (imported here: the measurement models cost every other command's start-up a moment)
        from lab.calibrate import measurements, scenario_file
        from lab.calibrate.estimate import estimate
        from lab.plan.checks import load

        m = measurements.read(folder)
        e = estimate(m, str(folder), rate)
        written = scenario_file.write(out, e, str(folder))
        load(out)  # the sweep's own loader: a file it would refuse is never handed over as calibrated
        try:
            (folder / ESTIMATE_FILE).write_text(e.model_dump_json(indent=1) + "\n", encoding="utf-8")
        except OSError as err:
            raise UsageError(f"cannot write {str(folder / ESTIMATE_FILE)!r}: {err.strerror}") from None
        terminal.table("first estimates", ["what", "estimate"], _rows(e))
        for note in e.notes:
            terminal.info(note)
        terminal.warning("not yet searched in the lab (Pantheon's step): these are first estimates only")
        terminal.success(f"wrote {', '.join(str(p) for p in written)}; run it: quiclab sweep --scenario {out}")
