"""The calibration benchmark (`quiclab bench calibrate`; issue 35 item 3): the "real path" is a hidden link on a
separate lab, never seen by the calibration (lab/bench/hidden.py draws them; their parameters are written down only
after each fit).

Per hidden link, two jobs (lab/bench/schedule.py decides which lab runs which, never both on one lab):
1. `hidden` (`python -m lab.bench.calibration hidden SPEC` on its lab): the link in force, measured as a user would:
   ping without load, then MEASURED_RUNS `iperf3 -R --json --get-server-output` downloads (from a server run with
   --json) per measured sender (cubic, bbr; pooled by the calibration), the first BBR run also captured on the
   client (headers only: its packets' arrivals), and one upload (`iperf3 --json --get-server-output`, cubic: the
   uplink's rate, a trace where it varies, lab/calibrate/estimate.py); then the held-out sender (reno, not used in
   the fit) by the lab's rule;
2. `calibrate` (`python -m lab.bench.calibration calibrate SPEC` on another lab; it is given the folder of the user's
   files, never the link): `probe` reads them, `calibrate` estimates and searches (lab/run/calibration.py), then the
   held-out sender runs on the fitted link. Its throughput and p50 RTT under load are compared with the hidden
   link's (hidden.Score). A calibration that fails on its input is censored (infinite error), never dropped.

The labs: this process's lab and the hidden lab H (both up); `--parallel 1`: H measures the hidden sides, this lab
calibrates, the two overlapping; `--parallel N` (or auto: lab/run/parallel.py's rule over the hidden links' rates)
with N >= 2: N labs (this one, H, and free ones brought up and taken down by lab/run/parallel.py `over_labs`) each
do both kinds of job. Each job is a process on its lab (QUICLAB_INSTANCE), started in its own session: Ctrl-C stops
them all (SIGTERM: each puts its link back unshaped and stops its senders) and records nothing of an unfinished job.

The folder (`--resume FOLDER` continues it): meta.json (the draw's seed, links, budget), per link `link-N/`
(`hidden/` with the user's files, `fit/` with the measurement folder and fit.json, `score.json`), each renamed into
place only when complete; calibrate.json and calibrate.md are rewritten from the scores after every link.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from lab import config, instance, lock, signals
from lab.bench import schedule
from lab.bench.hidden import HiddenLink, Score, draw, markdown, to_doc
from lab.bench.schedule import HIDDEN_DIR, SCORE, Job, Schedule
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
from lab.results.folder import place_dir, write_atomic
from lab.run import calibration, environment
from lab.run import parallel as labs_

MEASURED = ("cubic", "bbr")
HELD_OUT = "reno"
SECONDS = 10
PING = "ping.txt"
HELD = "held_out.json"
#: The held-out sender runs this many times on each side and is compared by its medians (calibration.median_observed):
#: one 10 s Reno run on a lossy link varied by up to 1.8x between two runs of the same hidden link (link 2 of
#: results/reference/calibrate-20261126: 4.39 Mbit/s there, 2.47 in a smoke run), more than the bound the
#: benchmark checks. Each run's figures are kept beside the median (HELD_EACH). 5 until 2026-11-27: the hidden
#: side's median of five then moved by more than the 25 % bound between benchmark runs of the same lossy link
#: (link 2: 4.54, 6.26 and 6.21 Mbit/s; link 9: 6.90, 8.14 and 7.49), and the interval of fitted / hidden at n = 5
#: (hidden.ratio_interval, the two sides' ranges) spanned the bound on 4-6 of the 10 links. At 15 the median's
#: interval is the 4th to the 12th run (96.5 %) instead of the whole range; it costs ~20 min more on two labs.
HELD_RUNS = 15
HELD_EACH = "held_out_runs.json"
FIT_DIR = "fit"
FITTED = "fitted.json"
META = "meta.json"
RESULTS = "calibrate.json"
TABLE = "calibrate.md"
HIDDEN_TIMEOUT_S = 600.0
#: Per job, what the estimate says (docs/calibrate.md "Time"), from the committed run's files' times (labs 1 and 2,
#: 2026-11-26 12:10-12:46, results/reference/calibrate-20261126): a hidden side ~50 s (47-48 s each); a calibration
#: ~24 s per candidate (two 10 s senders and their set-up; 20 candidates and Reno's run took 7.4-8.3 min) and the
#: held-out sender. (~60 s per candidate was measured on lab 7 with the job's process held to 35 % of a core.) The
#: held-out sender's HELD_RUNS runs add ~12 s each beyond the first on both sides; so do the measured senders'
#: MEASURED_RUNS runs beyond the first (3 and 5 from 2026-11-26's fourth run: 87 s before, 6 runs more).
HIDDEN_S = 160.0 + (15 - 5) * 12.0  # 160 s measured with 5 held-out runs; HELD_RUNS is 15 since 2026-11-27
CANDIDATE_S = 24.0


#: The user's upload (its congestion control; the file UPLOAD), which the estimate reads the uplink from.
UPLOAD_CC = "cubic"
UPLOAD = "upload.json"


#: Each measured sender's downloads on the hidden link (files cc.json, cc-2.json, ...), which the calibration pools
#: (lab/calibrate/senders.py): one 10 s run of a loss-based sender meets too few random losses to pin the loss a
#: loss-based held-out sender's throughput hangs on.
MEASURED_RUNS = 3


#: The user captures one download on the client, headers only (CAPTURE: `tcpdump -s 96 -w - tcp port 5399 | gzip
#: > bbr.pcap.gz` beside the first BBR run; the first run of 2026-11-27 kept it as bbr.pcap): its packets' arrivals
#: are the link's delivery at the millisecond, which the rate trace of a varying link is made from
#: (lab/calibrate/estimate.py; iperf3's intervals are 0.1 s at the finest, and a trace of 0.1 s averages gave BBR on
#: the TMobile recording 700 retransmissions for its 1900). BBR's, because it keeps the bottleneck's queue from
#: emptying on a varying link (13.9 % retransmissions on TMobile): its arrivals are the link's opportunities where a
#: loss-based sender's would show its own backing off.
CAPTURED = "bbr"
CAPTURE = "bbr.pcap.gz"
CAPTURE_RAW = "bbr.pcap"


def _run_file(cc: str, k: int) -> str:
    return f"{cc}.json" if k == 1 else f"{cc}-{k}.json"


def hidden_files(folder: Path) -> list[Path]:
    """The user's files of a hidden link: each measured sender's runs, the upload and the capture, as many as are
    there (links measured before had one run each, no upload and no capture)."""
    runs = [folder / _run_file(cc, k) for cc in MEASURED for k in range(1, MEASURED_RUNS + 1)
            if k == 1 or (folder / _run_file(cc, k)).is_file()]
    extra = [folder / f for f in (UPLOAD, CAPTURE, CAPTURE_RAW) if (folder / f).is_file()]
    return [folder / PING, *runs, *extra]


def _say(text: str) -> None:
    """A job's progress line to its coordinator (stdout: one JSON object a line)."""
    print(json.dumps({"say": text}), flush=True)


# --- the jobs, each in its lab's process ---------------------------------------------------------------------------

def _hidden_side(spec: dict[str, Any]) -> None:
    """The hidden lab's job: the link in force, the user's files and the held-out sender's figures written into
    `link-N/hidden/` (renamed into place at the end, with done.json naming this lab); the link left unshaped
    afterwards (also after Ctrl-C or SIGTERM)."""
    d = Path(spec["folder"])
    final = d / HIDDEN_DIR
    tmp = schedule.partial(final, str(os.getpid()))
    tmp.mkdir(parents=True)
    link = HiddenLink(**spec["link"])
    with lock.holding("quiclab bench calibrate (a hidden link)"):
        calibration.check_allowed({cc: Sender(cc, "down", SECONDS) for cc in (*MEASURED, HELD_OUT)})
        in_force = parse_link(*link.tables())
        # A recorded trace plays from when the link is given: given again right before the ping and each sender
        # (as a sweep does before each run: lab/run/runner.py _restart_trace), every measurement meets the same
        # stretch of the recording, so the held-out sender meets the path the measured ones met (a trace running on
        # would give each its own 10 s of a 120 s recording: ATT's first ten seconds fall from 27.6 to 0.3 Mbit/s).
        restart = calibration.restart_trace(in_force)
        try:
            shaper.apply(in_force, "linkem")
            _say("ping without load")
            if restart:
                restart()
            (tmp / PING).write_text(calibration.user_ping())
            for k in range(1, MEASURED_RUNS + 1):
                for cc in MEASURED:
                    _say(f"iperf3 {cc} download {k}/{MEASURED_RUNS}")
                    pcap = tmp / CAPTURE_RAW if (k, cc) == (1, CAPTURED) else None
                    (tmp / _run_file(cc, k)).write_text(
                        calibration.user_download(Sender(cc, "down", SECONDS), restart, pcap))
                    if pcap is not None:
                        (tmp / CAPTURE).write_bytes(gzip.compress(pcap.read_bytes()))
                        pcap.unlink()
            _say(f"iperf3 {UPLOAD_CC} upload")
            (tmp / UPLOAD).write_text(calibration.user_download(Sender(UPLOAD_CC, "up", SECONDS), restart))
            _say(f"held-out sender {HELD_OUT}, {HELD_RUNS} runs")
            held = _held_out(tmp, calibration.run_times(Sender(HELD_OUT, "down", SECONDS), HELD_RUNS, restart))
            (tmp / HELD).write_text(json.dumps(None if held is None else asdict(held)))
        finally:
            with contextlib.suppress(EnvironmentProblem):
                shaper.apply(Link(), "linkem")
    (tmp / schedule.DONE).write_text(json.dumps({"lab": config.INSTANCE.number}))
    place_dir(tmp, final)


def _calibrate_side(spec: dict[str, Any]) -> None:
    """The calibrating lab's job: from `link-N/hidden/`'s files alone, the fit and the held-out sender on it, into
    `link-N/fit/` (renamed into place at the end; fitted.json holds the figures)."""
    d = Path(spec["folder"])
    final = d / FIT_DIR
    tmp = schedule.partial(final, str(os.getpid()))
    tmp.mkdir(parents=True)
    budget = int(spec["budget"])

    def progress(i: int, c: Candidate, r: Result | None) -> None:
        _say(f"candidate {i}/{budget}: {fits.describe(c)}" + ("" if r else ": not measured"))

    (tmp / FITTED).write_text(json.dumps(calibrate_one(d / HIDDEN_DIR, tmp, budget, progress)))
    place_dir(tmp, final)


def calibrate_one(hidden: Path, work: Path, budget: int,
                  progress: Callable[[int, Candidate, Result | None], None]) -> dict[str, Any]:
    """The fit from the user's files in `hidden` (its measurement folder and fit.json into `work`) and the held-out
    sender on the fitted link: Score's fitted fields (`why` when the input allows no calibration)."""
    try:
        m = probe(hidden_files(hidden))
        measurements.write(work / "m", m)
        e = estimate(m, str(hidden), "auto")  # a rate that varies becomes a trace, which the search scales
        senders, real = measured_senders(m, str(hidden))
        start = fits.start(e, str(hidden))
    except UsageError as err:  # the user's files do not allow a calibration (e.g. iperf3 failed on this link)
        return {"why": f"not calibrated: {err}"}
    tables = partial(fits.candidate_tables, e, folder=work / "traces")
    found = calibration.search_in_lab(senders, real, start, tables, budget, progress, fits.search_range(e),
                                      fits.shapes(e, start))
    (work / "m" / fits.FILE).write_text(json.dumps(fits.fit_doc(found, real, dict(senders), start), indent=1))
    if found.best.result is None:
        return {"candidates": len(found.tried), "why": f"no candidate measured ({found.stopped})"}
    _say(f"held-out sender {HELD_OUT} on the fitted link, {HELD_RUNS} runs")
    got = _held_out(work, calibration.measure_on(tables(found.best.candidate), Sender(HELD_OUT, "down", SECONDS),
                                                 HELD_RUNS))
    return {"fitted_tput_bps": got.throughput_bps if got else None, "fitted_rtt_s": got.p50_rtt_s if got else None,
            "fitted": fits.describe(found.best.candidate, e), "error": found.best.error,
            "candidates": len(found.tried),
            "why": "" if got else "the held-out sender could not be measured on the fitted link"}


def _held_out(folder: Path, runs: Sequence[Observed | None]) -> Observed | None:
    """The held-out sender's figure from its runs on one side (their medians), each run kept in `folder`."""
    (folder / HELD_EACH).write_text(json.dumps([None if r is None else asdict(r) for r in runs], indent=1))
    return calibration.median_observed(runs)


def held_runs(out: Path) -> dict[int, tuple[list[float | None], list[float | None]]]:
    """Each scored link's held-out throughputs, run by run, on the hidden link and on the fitted one (HELD_EACH on
    both sides; a failed run None), by link index: what hidden.markdown's intervals are made from."""
    def side(f: Path) -> list[float | None]:
        return [None if r is None else float(r["throughput_bps"]) for r in json.loads(f.read_text())]

    got = {}
    for d in sorted(out.glob("link-*")):
        h, f = d / HIDDEN_DIR / HELD_EACH, d / FIT_DIR / HELD_EACH
        if d.name[5:].isdigit() and h.is_file() and f.is_file():
            got[int(d.name[5:])] = (side(h), side(f))
    return got


def score_of(link: HiddenLink, d: Path) -> Score:
    """A link's score from its complete job results: the hidden side's held-out figures and the fit's."""
    held = json.loads((d / HIDDEN_DIR / HELD).read_text())
    hidden = Observed(**held) if held else None
    fitted = json.loads((d / FIT_DIR / FITTED).read_text())
    return Score(link=link, hidden_tput_bps=hidden.throughput_bps if hidden else None,
                 hidden_rtt_s=hidden.p50_rtt_s if hidden else None, **fitted)


def write_score(d: Path, s: Score) -> None:
    write_atomic(d / SCORE, json.dumps(asdict(s), indent=1) + "\n")


def read_scores(out: Path, links: Sequence[HiddenLink]) -> list[Score]:
    """The scored links, in link order."""
    return [Score(**{**(doc := json.loads(p.read_text())), "link": HiddenLink(**doc["link"])})
            for lk in links if (p := schedule.link_dir(out, lk.index) / SCORE).is_file()]


def write_results(out: Path, links: Sequence[HiddenLink], meta: dict[str, Any]) -> list[Score]:
    """calibrate.json and calibrate.md from every score written so far (rewritten whole)."""
    scores = read_scores(out, links)
    left = [lk.index for lk in links if not (schedule.link_dir(out, lk.index) / SCORE).is_file()]
    (out / RESULTS).write_text(json.dumps({**to_doc(scores, meta), "not_done": left}, indent=1) + "\n")
    if scores:
        (out / TABLE).write_text(markdown(scores, HELD_OUT, held_runs(out)))
    return scores


# --- the coordinator -------------------------------------------------------------------------------------------------

def job_argv(kind: str, spec: dict[str, Any]) -> list[str]:
    """One job's process (run with its lab's QUICLAB_INSTANCE)."""
    return [sys.executable, "-m", "lab.bench.calibration", kind, json.dumps(spec)]


@dataclass
class Jobs:
    """The labs' shared work (lab/run/parallel.py `Pool`): the schedule behind a lock."""

    plan: Schedule
    stopping: threading.Event = field(default_factory=threading.Event)
    parts: tuple[str, ...] = ()  # the calibration needs the base lab only (iperf3 in client and server)
    changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def drained(self) -> bool:
        with self.changed:
            return self.plan.drained

    def take(self, lab: int) -> Job | None:
        """The next job for `lab`, waiting while one may yet come; None when none will (or on Ctrl-C)."""
        with self.changed:
            while not self.stopping.is_set():
                got = self.plan.next(lab)
                if got != schedule.WAIT:
                    return got if isinstance(got, Job) else None
                self.changed.wait(timeout=0.5)
            return None

    def done(self, job: Job, lab: int, ok: bool | None) -> None:
        """ok None: interrupted (not recorded, not the lab's failure)."""
        with self.changed:
            if ok is None:
                self.plan.interrupted(job)
            else:
                self.plan.finished(job, lab, ok)
            self.changed.notify_all()


@dataclass
class Outcome:
    scores: list[Score]
    left: list[int]  # links not scored (resume the folder to finish them)
    interrupted: bool
    errors: list[str]  # per lab, what failed


def _run_job(lab_: labs_.LabSlot, job: Job, argv: list[str], timeout_s: float | None,
             say: Callable[[str], None]) -> tuple[bool, str]:
    """The job's process on its lab, its progress passed on; (exited 0, the last line of its log)."""
    log_path = lab_.logs / f"lab{lab_.number}-link{job.link}-{job.kind}.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, env=labs_.lab_env(lab_.number), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    lab_.proc = proc
    timer, late = None, threading.Event()
    if timeout_s is not None:
        timer = threading.Timer(config.deadline(timeout_s), lambda: (late.set(), _stop(proc)))
        timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            with contextlib.suppress(ValueError, TypeError, KeyError):
                say(str(json.loads(line)["say"]))
        proc.wait()
    finally:
        if timer is not None:
            timer.cancel()
    if late.is_set():
        return False, f"did not finish within {timeout_s:g} s (stopped)"
    lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    return proc.returncode == 0, (lines[-1] if lines else f"exit {proc.returncode}")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)


def check_labs(own: int, hidden_lab: int, up: set[int]) -> None:
    """The hidden lab is another lab than this one, and up."""
    if hidden_lab == own:
        raise UsageError(f"invalid --hidden-lab {hidden_lab}: it must be another lab than this one "
                         f"({config.ENV_INSTANCE}={own}): the calibration must not see it")
    if hidden_lab not in up:
        raise UsageError(f"invalid --hidden-lab {hidden_lab}: lab {hidden_lab} is not up (labs up: {sorted(up)}; "
                         f"`{config.ENV_INSTANCE}={hidden_lab} uv run quiclab up` first)")


def load_meta(out: Path) -> dict[str, Any]:
    """A benchmark folder's meta.json (for --resume): exit 2 naming the folder when it is not one."""
    try:
        doc = json.loads((out / META).read_text())
        int(doc["seed"]), int(doc["links"]), int(doc["budget"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(f"invalid --resume {out}: not a `quiclab bench calibrate` folder (no readable {META} with "
                         "seed, links and budget)") from None
    return doc


def estimate_s(links: int, labs: int, budget: int) -> float:
    """The benchmark's expected time: the hidden sides spread over the labs that hold them, then the calibrations
    spread over the labs (with one lab per role they overlap: the calibrations set the time)."""
    one = budget * CANDIDATE_S + HELD_RUNS * 2 * SECONDS  # one link's calibration
    if labs <= 1:
        return HIDDEN_S + links * one
    return links * HIDDEN_S / labs + -(-links // labs) * one


def run(out: Path, links: Sequence[HiddenLink], meta: dict[str, Any], numbers: list[int], hidden_lab: int,
        both: bool, up: set[int], say: Callable[[str], None]) -> Outcome:
    """Every link not yet scored in `out`, over the labs `numbers` (this process's first; those not in `up` are
    brought up and taken down here; `both`: every lab measures and calibrates, else the hidden lab only measures);
    each finished link's score written at once."""
    budget = int(meta["budget"])
    hidden_on, calibrate_on = schedule.roles(numbers, hidden_lab, both)
    plan = schedule.from_folder(out, [lk.index for lk in links], numbers, hidden_on, calibrate_on)
    by_index = {lk.index: lk for lk in links}
    n = len(links)
    jobs = Jobs(plan)
    results_lock = threading.Lock()
    logs = out / "labs"
    logs.mkdir(parents=True, exist_ok=True)
    slots = [labs_.LabSlot(k, logs) for k in numbers]

    def work(lab_: labs_.LabSlot) -> None:
        while (job := jobs.take(lab_.number)) is not None:
            try:
                if not one(lab_, job):
                    return
            except Exception as e:  # (a result unreadable, a log not writable): this lab stops, its job goes back
                lab_.error = f"{job.kind} job of link {job.link}: {type(e).__name__}: {e}"
                jobs.done(job, lab_.number, False)
                return

    def one(lab_: labs_.LabSlot, job: Job) -> bool:
        """Run one job; whether the lab goes on."""
        lk, d = by_index[job.link], schedule.link_dir(out, job.link)
        d.mkdir(parents=True, exist_ok=True)
        head = f"lab {lab_.number}: hidden link {job.link + 1}/{n}"
        if job.kind == "hidden":
            say(f"{head}: measuring it as a user would")
            argv, timeout = job_argv("hidden", {"link": asdict(lk), "folder": str(d)}), HIDDEN_TIMEOUT_S
        else:
            say(f"{head}: calibrating from the user's files (budget {budget} candidates)")
            argv, timeout = job_argv("calibrate", {"folder": str(d), "budget": budget}), None
        ok, last = _run_job(lab_, job, argv, timeout, lambda text, h=head: say(f"{h}: {text}"))
        if not ok and jobs.stopping.is_set():  # stopped by Ctrl-C: nothing recorded, a resume runs it again
            jobs.done(job, lab_.number, None)
            return False
        if not ok:
            lab_.error = f"{job.kind} job of link {job.link}: {last}"
            say(f"{head}: failed ({last}); lab {lab_.number} takes no more jobs")
            jobs.done(job, lab_.number, False)
            return False
        if job.kind == "calibrate":
            with results_lock:
                s = score_of(lk, d)
                write_score(d, s)
                done = len(write_results(out, links, meta))
            say(f"{head}: scored: {HELD_OUT} throughput error {s.tput_error:.1%}, p50 RTT error "
                f"{s.rtt_error:.1%} ({done}/{n} links scored)")
        jobs.done(job, lab_.number, True)
        return True

    interrupted, problems = labs_.over_labs(slots, jobs, work, up)
    scores = write_results(out, links, meta)
    errors = [f"lab {s.number}: {s.error}" for s in slots if s.error] + problems
    return Outcome(scores, [lk.index for lk in links if lk.index not in {s.link.index for s in scores}],
                   interrupted, errors)


def provenance(out: Path, labs: Sequence[int], diff_name: str) -> dict[str, Any]:
    """What the benchmark ran from: the project's commit (a dirty tree's diff kept in `out` as `diff_name`:
    environment.git) and, per lab, the image ID of its router, client and server (the containers a calibration
    uses)."""
    names = [instance.parse(str(k)).container(c) for k in labs for c in ("router", "client", "server")]
    return {"git": environment.git(out, diff_name), "images": environment.container_images(names)}


def start(out: Path | None, resume: Path | None, n: int, seed: int, budget: int, hidden_lab: int,
          parallel: int | None, up: set[int]) -> tuple[Path, list[HiddenLink], dict[str, Any], list[int]]:
    """The folder (new, or the one resumed with its own seed, links and budget), the links and the labs: this one
    and the hidden lab with `parallel` 1 (roles split) or 2, and free ones beyond (None: auto). meta.json records
    what it ran from (provenance; a resume adds its own under `resumed`)."""
    own = config.INSTANCE.number
    check_labs(own, hidden_lab, up)
    if resume is not None:
        meta = load_meta(resume)
        out = resume
    else:
        assert out is not None
        out.mkdir(parents=True, exist_ok=True)
        meta = {"seed": seed, "links": n, "budget": budget, "measured": list(MEASURED), "held_out": HELD_OUT,
                "held_out_runs": HELD_RUNS, "measured_runs": MEASURED_RUNS, "seconds": SECONDS}
    links = draw(int(meta["links"]), int(meta["seed"]), recorded_pairs())
    count = parallel if parallel is not None else labs_.auto_for(
        [lk.rate_bps if not lk.trace else parse_link(*lk.tables()).downlink.effective_rate_bps for lk in links],
        len(links))
    numbers = [own, hidden_lab] if count <= 2 else labs_.pick_labs(count, given=[hidden_lab])
    on = [k for k in numbers if k in up]  # (labs brought up later run the same image tags)
    if resume is not None:
        resumed = list(meta.get("resumed", []))
        meta["resumed"] = [*resumed, provenance(out, on, f"source-resume-{len(resumed) + 1}.diff")]
    else:
        meta.update(provenance(out, on, "source.diff"))
    (out / META).write_text(json.dumps(meta, indent=1) + "\n")
    meta = {**meta, "labs": numbers, "hidden_lab": hidden_lab, "calibration_lab": own,
            "both_roles": count >= 2}
    return out, links, meta, numbers


if __name__ == "__main__" and sys.argv[1:2] in (["hidden"], ["calibrate"]):
    signals.terminate_as_interrupt()  # the coordinator stops a job with SIGTERM: its clean-up runs
    try:
        (_hidden_side if sys.argv[1] == "hidden" else _calibrate_side)(json.loads(sys.argv[2]))
    except KeyboardInterrupt:
        signals.exit_after_interrupt()
