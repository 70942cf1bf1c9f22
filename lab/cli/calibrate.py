"""`quiclab calibrate MEASUREMENTS --out link.toml [--search]`: the first estimates of a link from a measurement
folder (lab/calibrate/estimate.py), written as a scenario file the sweep runs, checked with the scenario loader; with
--search, refined in the lab first (Pantheon's search, lab/calibrate/search.py, measured by lab/run/calibration.py):
the fit and every candidate kept in the folder (fit.json), each sender's error printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from lab import terminal
from lab.errors import UsageError

if TYPE_CHECKING:
    from lab.calibrate.estimate import Estimate
    from lab.calibrate.measurements import Measurements

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
        search: Annotated[bool, typer.Option(
            "--search", help="Refine the estimates in the lab (this QUICLAB_INSTANCE, up): run the measured senders "
                             "(two or more congestion controls) through candidate links until they match.")] = False,
        budget: Annotated[int, typer.Option("--budget", min=1, max=500,
                                            help="--search: at most this many candidate links measured.")] = 40,
    ) -> None:
        """First estimates of the measured path's link (base RTT, rate or rate trace, queue, random loss, jitter),
        written as a scenario file for `quiclab sweep --scenario FILE`; with --search, fitted in the lab."""
        # (imported here: the measurement models cost every other command's start-up a moment)
        from lab.calibrate import measurements, scenario_file
        from lab.calibrate.estimate import estimate
        from lab.plan.checks import load

        m = measurements.read(folder)
        e = estimate(m, str(folder), rate)
        searched = ""
        if search:
            e, searched = _search(m, e, folder, budget)
        written = scenario_file.write(out, e, str(folder), searched)
        load(out)  # the sweep's own loader: a file it would refuse is never handed over as calibrated
        try:
            (folder / ESTIMATE_FILE).write_text(e.model_dump_json(indent=1) + "\n", encoding="utf-8")
        except OSError as err:
            raise UsageError(f"cannot write {str(folder / ESTIMATE_FILE)!r}: {err.strerror}") from None
        terminal.table("first estimates", ["what", "estimate"], _rows(e))
        for note in e.notes:
            terminal.info(note)
        if not search:
            terminal.warning("not yet searched in the lab (Pantheon's step, --search): these are first estimates only")
        terminal.success(f"wrote {', '.join(str(p) for p in written)}; run it: quiclab sweep --scenario {out}")


def _search(m: Measurements, e: Estimate, folder: Path, budget: int) -> tuple[Estimate, str]:
    """The lab search from the first estimates: the fitted estimate and what the search did (one line); fit.json
    written into the folder, each sender's error printed. Bad input (fewer than two senders) exits 2 before the lab
    is touched. A downlink rate trace is searched as a scale of itself (fit.fitted); its candidates' traces are
    written into FOLDER/traces."""
    from functools import partial

    from lab.calibrate import fit as fits
    from lab.calibrate.senders import measured_senders
    from lab.run.calibration import search_in_lab

    senders, real = measured_senders(m, str(folder))
    first = fits.start(e, str(folder))
    terminal.info(f"searching in the lab: senders {', '.join(senders)}, at most {budget} candidate links "
                  f"(~{sum(s.seconds for s in senders.values()) + 5 * len(senders)} s each)")

    def progress(i: int, c: object, result: object) -> None:
        terminal.info(f"candidate {i}/{budget}: {fits.describe(c)}" + ("" if result else ": not measured"))

    found = search_in_lab(senders, real, first, partial(fits.candidate_tables, e, folder=folder / "traces"), budget,
                          progress, fits.search_range(e), fits.shapes(e, first))
    path = folder / fits.FILE
    try:
        path.write_text(json.dumps(fits.fit_doc(found, real, dict(senders), first), indent=1) + "\n",
                        encoding="utf-8")
    except OSError as err:
        raise UsageError(f"cannot write {str(path)!r}: {err.strerror}") from None
    if found.best.result is None:
        raise UsageError(f"{folder}: no candidate link could be measured ({found.stopped}); see {path}")
    terminal.table("each sender: real path vs fitted link", fits.ERROR_COLUMNS, fits.error_rows(real, found.best))
    line = (f"{len(found.tried)} candidates measured, {found.rounds} rounds, {found.stopped}; mean squared log "
            f"error {found.best.error:.4g} (fit.json)")
    return fits.fitted(e, found.best.candidate), line
