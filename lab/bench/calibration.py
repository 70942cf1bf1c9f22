"""The calibration benchmark (`quiclab bench calibrate`; issue 35 item 3): the "real path" is a hidden link on a
separate lab, never seen by the calibration (lab/bench/hidden.py draws them; their parameters are written down only
after each fit).

Per hidden link:
1. the hidden lab (`QUICLAB_INSTANCE=H`, a subprocess: `python -m lab.bench.calibration hidden SPEC`) puts the link
   in force and measures it as a user would: ping without load, then one `iperf3 -R --json --get-server-output`
   download (from a server run with --json) per measured sender (cubic, bbr); then the held-out sender (reno, not
   used in the fit) by the lab's rule;
2. this lab: `probe` reads the user's files, `calibrate` estimates and searches (lab/run/calibration.py);
3. this lab: the held-out sender on the fitted link. Its throughput and p50 RTT under load are compared with the
   hidden link's (hidden.Score). A calibration that fails is censored (infinite error), never dropped; the lab
   failing stops the benchmark.
The results (calibrate.json, after every link) and their table (calibrate.md) go to the output folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from lab import config, lock
from lab.bench.hidden import HiddenLink, Score, draw, markdown, to_doc
from lab.calibrate import fit as fits
from lab.calibrate import measurements
from lab.calibrate.estimate import estimate
from lab.calibrate.probe import probe
from lab.calibrate.search import Candidate, Observed, Result
from lab.calibrate.senders import Sender, measured_senders
from lab.errors import EnvironmentProblem, UsageError
from lab.link import shaper
from lab.link.model import Link
from lab.link.spec import parse_link, recorded_pairs
from lab.run import calibration

MEASURED = ("cubic", "bbr")
HELD_OUT = "reno"
SECONDS = 10
PING = "ping.txt"
HELD = "held_out.json"
RESULTS = "calibrate.json"
TABLE = "calibrate.md"
_HIDDEN_TIMEOUT_S = 600.0


def hidden_files(folder: Path) -> list[Path]:
    return [folder / PING, *(folder / f"{cc}.json" for cc in MEASURED)]


def _hidden_side(spec: dict[str, Any]) -> None:
    """In the hidden lab's process: the link in force, the user's files and the held-out sender's figures written
    into spec["folder"]; the link left unshaped afterwards (also after Ctrl-C)."""
    folder = Path(spec["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    link = HiddenLink(**spec["link"])
    with lock.holding("quiclab bench calibrate (the hidden link)"):
        calibration.check_allowed({cc: Sender(cc, "down", SECONDS) for cc in (*MEASURED, HELD_OUT)})
        try:
            shaper.apply(parse_link(*link.tables()), "linkem")
            (folder / PING).write_text(calibration.user_ping())
            for cc in MEASURED:
                (folder / f"{cc}.json").write_text(calibration.user_download(Sender(cc, "down", SECONDS)))
            held = calibration.run_sender(Sender(HELD_OUT, "down", SECONDS))
            (folder / HELD).write_text(json.dumps(None if held is None else asdict(held)))
        finally:
            shaper.apply(Link(), "linkem")


def measure_hidden(link: HiddenLink, folder: Path, hidden_lab: int) -> str:
    """The hidden lab's part, in a subprocess with QUICLAB_INSTANCE set; "" or why it failed (one line)."""
    spec = json.dumps({"link": asdict(link), "folder": str(folder)})
    env = {**os.environ, config.ENV_INSTANCE: str(hidden_lab)}
    try:
        done = subprocess.run([sys.executable, "-m", "lab.bench.calibration", "hidden", spec], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_HIDDEN_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        return f"the hidden lab did not finish in {_HIDDEN_TIMEOUT_S:g} s"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise EnvironmentProblem(f"the hidden lab {hidden_lab} failed: {tail[0]}")
    return ""


def calibrate_one(link: HiddenLink, folder: Path, budget: int,
                  progress: Callable[[int, Candidate, Result | None], None]) -> Score:
    """Steps 2 and 3 for one hidden link whose files are in `folder` (see the module's docstring)."""
    held = json.loads((folder / HELD).read_text())
    hidden = Observed(**held) if held else None
    base = Score(link=link, hidden_tput_bps=hidden.throughput_bps if hidden else None,
                 hidden_rtt_s=hidden.p50_rtt_s if hidden else None)
    try:
        m = probe(hidden_files(folder))
        measurements.write(folder / "m", m)
        e = estimate(m, str(folder), "constant")
        senders, real = measured_senders(m, str(folder))
        start = fits.start(e, str(folder))
    except UsageError as err:  # the user's files do not allow a calibration (e.g. iperf3 failed on this link)
        return Score(**{**asdict(base), "link": link, "why": f"not calibrated: {err}"})
    found = calibration.search_in_lab(senders, real, start, partial(fits.candidate_tables, e), budget, progress)
    (folder / "m" / fits.FILE).write_text(json.dumps(fits.fit_doc(found, real, dict(senders), start), indent=1))
    if found.best.result is None:
        return Score(**{**asdict(base), "link": link, "candidates": len(found.tried),
                        "why": f"no candidate measured ({found.stopped})"})
    got = calibration.measure_on(fits.candidate_tables(e, found.best.candidate), Sender(HELD_OUT, "down", SECONDS))
    return Score(link=link, hidden_tput_bps=base.hidden_tput_bps, hidden_rtt_s=base.hidden_rtt_s,
                 fitted_tput_bps=got.throughput_bps if got else None, fitted_rtt_s=got.p50_rtt_s if got else None,
                 fitted=fits.describe(found.best.candidate), error=found.best.error, candidates=len(found.tried),
                 why="" if got else "the held-out sender could not be measured on the fitted link")


def run(n: int, seed: int, hidden_lab: int, budget: int, out: Path,
        say: Callable[[str], None]) -> list[Score]:
    """The benchmark over n hidden links; calibrate.json and calibrate.md rewritten after every link."""
    if hidden_lab == config.INSTANCE.number:
        raise UsageError(f"invalid --hidden-lab {hidden_lab}: it must be another lab than this one "
                         f"({config.ENV_INSTANCE}={config.INSTANCE.number}): the calibration must not see it")
    links = draw(n, seed, recorded_pairs())
    meta = {"seed": seed, "budget": budget, "hidden_lab": hidden_lab, "calibration_lab": config.INSTANCE.number,
            "measured": list(MEASURED), "held_out": HELD_OUT, "seconds": SECONDS}
    scores: list[Score] = []
    for link in links:
        folder = out / f"link-{link.index}"
        say(f"hidden link {link.index + 1}/{n}: measuring it as a user would on lab {hidden_lab}")
        why = measure_hidden(link, folder, hidden_lab)
        if why:
            scores.append(Score(link=link, hidden_tput_bps=None, hidden_rtt_s=None, why=why))
        else:
            def progress(i: int, c: Candidate, r: Result | None, k: int = link.index) -> None:
                say(f"hidden link {k + 1}/{n}: candidate {i}/{budget}: {fits.describe(c)}"
                    + ("" if r else ": not measured"))
            scores.append(calibrate_one(link, folder, budget, progress))
        (out / RESULTS).write_text(json.dumps(to_doc(scores, meta), indent=1) + "\n")
        (out / TABLE).write_text(markdown(scores, HELD_OUT))
    return scores


if __name__ == "__main__" and sys.argv[1:2] == ["hidden"]:
    _hidden_side(json.loads(sys.argv[2]))
