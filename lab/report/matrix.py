"""The stack matrix's report (issue 33; a sweep whose scenario has `matrix`, lab/plan/matrix.py): one cell per server
x client over HTTP/3 and one row per TCP baseline, each with its median goodput and efficiency (goodput / the
link's downlink rate) with the order-statistic interval of the median at the level it has at its n, a verdict
against the TCP baseline by `quiclab compare`'s rule (lab/stats/verdict.py judge_metric: paired over the same
repeat and link seed where every result has its partner), and, for a cell that failed or fell clearly below the
link, what is known of why. Pure: records and the manifest's scenario in, tables out (the heatmap is
lab/report/heatmap.py)."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from lab.explain import closecodes
from lab.explain.model import EXPLAIN_JSON, Explanation
from lab.quantiles import median
from lab.report.summary import md_table
from lab.results.folder import RUNS
from lab.results.schema import RunRecord
from lab.results.store import load_runs
from lab.stats.fmt import EN, NA, fmt_ci, fmt_est, fmt_level, sig3
from lab.stats.stats import CI, Est, exclusion_reason, is_censored, median_ci, method_label, quantile
from lab.stats.verdict import Margins, group_samples, judge_metric

CellStatus = Literal["ok", "partly failed", "failed", "unsupported", "no result", "not run"]
MATRIX_MD = "matrix.md"
MATRIX_SVG = "matrix.svg"
#: the TCP protocol a cell is judged against (HTTP/2: multiplexed like HTTP/3, over TLS 1.3 like it)
BASELINE_PROTOCOL = "h2"
#: the link on which a cell under WHY_EFFICIENCY at 0 % loss needs a why (issue 33 item 4; lab/plan/matrix.py)
WHY_LINK, WHY_EFFICIENCY = "goodput", 0.8

NOTE = ("Cell = the HTTP/3 runs of one server x client pair: the median goodput (payload bits / transfer time) and "
        "the efficiency = goodput / the link's downlink rate, each with the distribution-free order-statistic "
        "interval of the median at the level it really has at that n; failed and timed-out runs are censored at "
        "their own end (goodput below size / that time: shown as \"<\"), never dropped. Verdict = the cell's "
        "goodput against the HTTP/2 TCP baseline's (the baseline to the same server where that server is a "
        "baseline, else the first baseline) by `quiclab compare`'s rule: paired over the "
        "same repeat and link seed (the median per-pair ratio and its sign-based interval), equivalent inside "
        "\u00b110 %, faster/slower when the whole interval lies beyond it, else inconclusive (docs/results.md "
        "\"Do two sweeps agree?\").")


@dataclass(frozen=True)
class Verdict:
    baseline: str  # the baseline's method label, e.g. "HTTP/2 curl→nginx"
    verdict: str  # equivalent | faster | slower | inconclusive
    ratio: Est  # cell / baseline goodput
    lo: Est | None
    hi: Est | None
    level: float | None
    reason: str
    design: str  # paired | unpaired


@dataclass(frozen=True)
class Cell:
    server: str
    client: str
    protocol: str
    status: CellStatus
    n: int  # results: completed + censored
    n_censored: int
    n_excluded: int
    rate_bps: float | None
    goodput: Est | None  # median goodput, bit/s
    ci: CI | None  # its order-statistic interval
    failure: str  # unsupported: the registry's reason; failed: the runs' own failure (most common), with its count
    run_keys: tuple[str, ...]
    verdict: Verdict | None = None
    share: float | None = None  # cross traffic: the measured flow's median share of the shared interval's bytes
    other_share: float | None = None  # ... and the competing flows'
    why: str = ""  # an explanation's reason (explain.json of one of its runs), when the folder has one
    why_run: str = ""  # that run
    captured: str = ""  # a run of the cell with a client-side capture in the folder ("" when none)
    loss_pct: float = 0.0
    sender_cc: tuple[str, ...] = ()  # the sender's congestion control as its runs read it back (cc_sender), each once

    @property
    def method(self) -> str:
        return method_label(self.protocol, self.client, self.server)

    @property
    def efficiency(self) -> Est | None:
        return _scaled(self.goodput, self.rate_bps)

    @property
    def efficiency_ci(self) -> tuple[Est, Est] | None:
        if self.ci is None or not self.rate_bps:
            return None
        lo, hi = _scaled(self.ci.lo, self.rate_bps), _scaled(self.ci.hi, self.rate_bps)
        return (lo, hi) if lo is not None and hi is not None else None


def _scaled(e: Est | None, rate: float | None) -> Est | None:
    if e is None or not rate:
        return None
    return Est(None if e.value is None else e.value / rate, e.bound)


@dataclass(frozen=True)
class Matrix:
    link: str  # the matrix's link (the scenario's `matrix`)
    servers: list[str]  # rows: the servers of the HTTP/3 matrix, in the scenario's order
    clients: list[str]  # columns
    cells: dict[tuple[str, str], Cell]  # (server, client) -> its HTTP/3 cell
    baselines: list[Cell]  # the TCP baselines (HTTP/1.1 and HTTP/2 of each baseline pair)

    def cell(self, server: str, client: str) -> Cell:
        return self.cells[(server, client)]

    def needs_why(self) -> list[Cell]:
        """Cells that failed, and, on the goodput link at 0 % loss, cells whose median efficiency is under 0.8."""
        return [c for c in self.cells.values() if needs_why(c, self.link)]


def needs_why(c: Cell, link: str) -> bool:
    if c.status in ("failed", "partly failed", "no result"):
        return True
    eff = c.efficiency
    low = eff is not None and eff.value is not None and eff.bound != ">" and eff.value < WHY_EFFICIENCY
    return link == WHY_LINK and c.loss_pct == 0 and low


def scenario_of(manifest: Mapping[str, Any]) -> dict[str, Any]:
    s = manifest.get("scenario")
    return s if isinstance(s, dict) else {}


def is_matrix(manifest: Mapping[str, Any]) -> bool:
    return bool(scenario_of(manifest).get("matrix"))


def _pair(text: str) -> tuple[str, str]:
    c, _, s = text.partition(">")
    return c.strip(), s.strip()


def _planned(scenario: Mapping[str, Any]) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """The HTTP/3 matrix's servers and clients (those of the scenario's pairs, else all of them) and the TCP
    baseline pairs (client, server), as the manifest's scenario planned them."""
    clients, servers = list(scenario.get("clients", [])), list(scenario.get("servers", []))
    pairs = [_pair(p) for p in scenario.get("pairs", [])]
    if pairs:
        servers = [s for s in servers if any(ps == s for _, ps in pairs)]
        clients = [c for c in clients if any(pc == c for pc, _ in pairs)]
    return servers, clients, [_pair(p) for p in scenario.get("tcp_pairs", [])]


def _share(r: RunRecord) -> tuple[float | None, float | None]:
    """The measured flow's share and the competing flows' (summed) of a run's `competing` JSON."""
    try:
        flows = json.loads(r.competing).get("flows", []) if r.competing else []
    except (ValueError, AttributeError):
        return None, None
    shares = [f.get("share") for f in flows if isinstance(f, dict)]
    if not shares or shares[0] is None:
        return None, None
    others = [s for s in shares[1:] if s is not None]
    return float(shares[0]), (float(sum(others)) if others else None)


def _failure(rs: Sequence[RunRecord]) -> str:
    """The most common failure text of the censored runs, with how many of them had it."""
    texts = Counter((r.failure or r.status).strip() for r in rs if is_censored(r))
    if not texts:
        return ""
    text, count = texts.most_common(1)[0]
    total = sum(texts.values())
    return closecodes.named(text) + (f" ({count} of {total} failed runs)" if total > 1 else "")


#: Where `quiclab matrix --why FOLDER` puts its sweeps: one captured run of each cell that needs a why, explained.
WHYS_DIR = "whys"


def why_sweeps(folder: Path | None) -> list[tuple[Path, list[RunRecord]]]:
    """The matrix folder's why sweeps (FOLDER/whys/*, oldest first), each with its runs."""
    root = None if folder is None else folder / WHYS_DIR
    if root is None or not root.is_dir():
        return []
    out = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and (p / RUNS).is_file()):
        with contextlib.suppress(OSError, ValueError):
            out.append((sub, load_runs(sub)))
    return out


def make_cell(server: str, client: str, protocol: str, rs: Sequence[RunRecord], folder: Path | None = None,
              whys: Sequence[tuple[Path, list[RunRecord]]] = ()) -> Cell:
    if not rs:
        return Cell(server, client, protocol, "not run", 0, 0, 0, None, None, None,
                    "no run of this pair is recorded (the sweep did not get to it)", ())
    keys = tuple(r.run_key for r in rs)
    rate = next((r.rate_bps for r in rs if r.rate_bps), None)
    loss = max(r.loss_pct for r in rs)
    if all(r.status == "unsupported" for r in rs):
        return Cell(server, client, protocol, "unsupported", 0, 0, len(rs), rate, None, None,
                    rs[0].failure or "unsupported", keys, loss_pct=loss)
    s = group_samples(rs)
    n = len(s.goodput)
    if n == 0:
        reasons = Counter(exclusion_reason(r) or "" for r in rs)
        return Cell(server, client, protocol, "no result", 0, 0, len(rs), rate, None, None,
                    "no run is a result: " + ", ".join(f"{k} {v}" for k, v in reasons.items()), keys, loss_pct=loss)
    obs = sorted(s.goodput, key=lambda o: (o.rank, o.value or 0.0))
    status: CellStatus = "failed" if s.n_censored == n else "partly failed" if s.n_censored else "ok"
    shares = [_share(r) for r in rs if exclusion_reason(r) is None]
    mine = [a for a, _ in shares if a is not None]
    theirs = [b for _, b in shares if b is not None]
    captured = next((r.run_key for r in rs if any(_pcap_here(p, folder) for p in r.evidence.split())), "")
    why, why_run = _explained(folder, rs) if folder is not None else ("", "")
    for sub, runs in reversed(whys) if not why else ():  # the newest why sweep that explained a run of this cell
        its = [r for r in runs if (r.protocol, r.client, r.server) == (protocol, client, server)]
        if its and (found := _explained(sub, its))[0]:
            why, why_run = found[0], f"{WHYS_DIR}/{sub.name} {found[1]}"
            if all(r.status == "ok" for r in its) and any(is_censored(r) for r in rs):
                why = (f"the why run{'s' if len(its) > 1 else ''} transferred (the failure did not recur), so "
                       f"this is a run that worked: {why}")
            break
    return Cell(server, client, protocol, status, n, s.n_censored, s.n_excluded, rate, quantile(obs, 0.5),
                median_ci(obs), _failure(rs), keys, share=median(mine) if mine else None,
                other_share=median(theirs) if theirs else None, why=why, why_run=why_run, captured=captured,
                loss_pct=loss, sender_cc=tuple(dict.fromkeys(r.cc_sender for r in rs if r.cc_sender)))


def _pcap_here(path: str, folder: Path | None) -> bool:
    """A run's client-side capture, still in the folder (a reference folder keeps no captures: lab/results/publish)."""
    return Path(path).name == "client-side.pcap" and (folder is None or (folder / path).is_file())


def _explained(folder: Path, rs: Sequence[RunRecord]) -> tuple[str, str]:
    """The first reason of an explanation of one of the runs (failed runs first), when the folder has one."""
    for r in sorted(rs, key=lambda r: (r.status == "ok", r.repeat)):
        path = folder / "evidence" / r.run_key.replace("/", "_") / EXPLAIN_JSON
        if not path.is_file():
            continue
        try:
            e = Explanation.model_validate_json(path.read_text())
        except (OSError, ValidationError, ValueError):
            continue
        text = e.reasons[0].text if e.reasons else (f"{e.status}: {e.why}" if e.why else e.status)
        return text, r.run_key
    return "", ""


def judge(cell: Cell, rs: Sequence[RunRecord], base: Cell, base_rs: Sequence[RunRecord],
          margins: Margins | None = None) -> Verdict | None:
    """The cell's goodput against the baseline's, B/A = cell / baseline, by compare's rule (judge_metric)."""
    if cell.status in ("unsupported", "not run", "no result") or base.n == 0:
        return None
    m = margins or Margins()
    a, b = group_samples(base_rs), group_samples(rs)
    j = judge_metric("goodput", a.goodput, b.goodput, a.keys, b.keys, m.median, m.alpha)
    verdict = j.verdict
    if verdict == "differs":
        verdict = "faster" if (j.ratio.value or 0) > 1 else "slower"
    ci = j.ci
    return Verdict(base.method, verdict, j.ratio, ci.lo.est() if ci else None, ci.hi.est() if ci else None,
                   ci.level if ci else None, j.reason, j.design)


def build(records: Sequence[RunRecord], manifest: Mapping[str, Any], folder: Path | None = None,
          margins: Margins | None = None) -> Matrix:
    """The matrix of a matrix sweep's records (every planned pair a cell: a pair without records is "not run")."""
    scenario = scenario_of(manifest)
    servers, clients, tcp = _planned(scenario)
    by: dict[tuple[str, str, str], list[RunRecord]] = {}
    for r in records:
        by.setdefault((r.protocol, r.client, r.server), []).append(r)
    whys = why_sweeps(folder)
    baselines = [make_cell(s, c, p, by.get((p, c, s), []), folder, whys) for c, s in tcp for p in ("h1", "h2")]
    base_of = {b.server: b for b in baselines if b.protocol == BASELINE_PROTOCOL}
    first = next(iter(base_of.values()), None)
    cells: dict[tuple[str, str], Cell] = {}
    for s in servers:
        for c in clients:
            rs = by.get(("h3", c, s), [])
            cell = make_cell(s, c, "h3", rs, folder, whys)
            base = base_of.get(s, first)
            if base is not None:
                v = judge(cell, rs, base, by.get((base.protocol, base.client, base.server), []), margins)
                cell = _with(cell, verdict=v)
            cells[(s, c)] = cell
    return Matrix(str(scenario.get("matrix", "")), servers, clients, cells, baselines)


def _with(cell: Cell, **changes: Any) -> Cell:
    return replace(cell, **changes)


# ---------------------------------------------------------------------------------------------------------------
# Text


def mbit(e: Est | None) -> str:
    return fmt_est(e, 1e-6)


def eff_text(c: Cell) -> str:
    """"0.93 [0.91-0.95, 93.8 %]": the efficiency and its interval at its level."""
    e = c.efficiency
    if e is None:
        return NA
    ci = c.efficiency_ci
    inner = f" [{fmt_est(ci[0], 1, _two)}{EN}{fmt_est(ci[1], 1, _two)}, {fmt_level(c.ci)}]" if ci else ""
    return fmt_est(e, 1, _two) + inner


def _two(v: float) -> str:
    return f"{v:.2f}"


def status_text(c: Cell) -> str:
    if c.status == "partly failed":
        return f"{c.n_censored} of {c.n} failed"
    if c.status == "failed":
        return f"failed ({c.n_censored} of {c.n})"
    return c.status


#: What a cell whose every run failed shows for its goodput: no figure. Each run is censored at its own end (the
#: verdict still uses them: a run that timed out is slower than a baseline that finished sooner), but the median of
#: such bounds is not a goodput: a run that got HTTP 400 after 68 ms is "below 1231 Mbit/s" (efficiency "<123") on a
#: 10 Mbit/s link (results/reference/matrix-goodput, quinn-client→haproxy).
FAILED_FIGURE = "none (every run failed)"


def goodput_texts(c: Cell) -> list[str]:
    """The goodput median, its CI and level, and the efficiency as the table shows them."""
    return [mbit(c.goodput), fmt_ci(c.ci, 1e-6), fmt_level(c.ci), eff_text(c)]


def verdict_text(v: Verdict | None) -> str:
    if v is None:
        return NA
    ci = f" [{fmt_est(v.lo)}{EN}{fmt_est(v.hi)}, {v.level * 100:.1f} %]" if v.lo is not None and v.hi is not None \
        and v.level is not None else ""
    return f"{v.verdict} ({fmt_est(v.ratio)}x{ci}, {v.design})"


COLUMNS = ["server", "client", "method", "status", "n (censored)", "goodput Mbit/s median", "CI", "CI level",
           "efficiency [CI]", "vs TCP baseline", "verdict (cell/baseline goodput [CI], design)", "failure or why"]
SHARE_COLUMNS = ["share (measured)", "share (competing)"]


def _share_text(v: float | None) -> str:
    return NA if v is None else f"{v * 100:.1f} %"


def _reason(c: Cell) -> str:
    parts = [p for p in (c.failure, f"why ({c.why_run}): {c.why}" if c.why else "") if p]
    return "; ".join(parts)


def table(m: Matrix) -> tuple[list[str], list[list[str]]]:
    """One row per cell (servers x clients) then per TCP baseline; cross traffic adds both flows' shares."""
    shares = any(c.share is not None for c in [*m.cells.values(), *m.baselines])
    cols = COLUMNS[:9] + (SHARE_COLUMNS if shares else []) + COLUMNS[9:]
    rows = []
    for c in [*(m.cells[(s, cl)] for s in m.servers for cl in m.clients), *m.baselines]:
        row = [c.server, c.client, c.method, status_text(c), f"{c.n} ({c.n_censored})" if c.n else "0",
               *(goodput_texts(c) if c.status != "failed" else [FAILED_FIGURE, NA, NA, NA])]
        if shares:
            row += [_share_text(c.share), _share_text(c.other_share)]
        row += [c.verdict.baseline if c.verdict else ("baseline" if c.protocol != "h3" else NA),
                verdict_text(c.verdict), _reason(c)]
        rows.append(row)
    return cols, rows


def why_lines(m: Matrix, folder: str) -> list[str]:
    """"needs a why": each such cell, what is known, and the command that explains a captured run of it."""
    out = []
    for c in m.needs_why():
        what = status_text(c) if c.status != "ok" else f"efficiency {eff_text(c)} < {WHY_EFFICIENCY}"
        known = f"; why ({c.why_run}): {c.why}" if c.why else ""
        if c.why_run.startswith(f"{WHYS_DIR}/"):
            sub, key = c.why_run.split(" ", 1)
            cmd = f"quiclab explain {folder}/{sub} --run {key}"
        elif c.captured:
            cmd = f"quiclab explain {folder} --run {c.captured}"
        else:
            cmd = f"quiclab matrix --why {folder}"
        failure = f" ({c.failure})" if c.failure else ""
        out.append(f"{c.method}: {what}{failure}{known}; explain: `{cmd}`")
    return out


def scope_line(m: Matrix) -> str:
    """What the matrix holds and what its efficiency is relative to (matrix.md's first line, the docs' too)."""
    rate = next((c.rate_bps for c in [*m.cells.values(), *m.baselines] if c.rate_bps), None)
    cc = sorted({c for b in m.baselines for c in b.sender_cc})
    return (f"{len(m.servers)} servers x {len(m.clients)} clients over HTTP/3, {len(m.baselines)} TCP baselines "
            f"(their sender's congestion control, read back in each run: {', '.join(cc) or NA}); "
            f"efficiency = goodput / {sig3(rate / 1e6) if rate else NA} Mbit/s (the downlink rate).")


def why_intro(m: Matrix) -> str:
    """What the "needs a why" list holds."""
    low = f", and cells under efficiency {WHY_EFFICIENCY} at 0 % loss" if m.link == WHY_LINK else ""
    return (f"Cells that failed{low}"
            " (`quiclab explain` tells handshake, loss recovery, receiver or flow-control limits, pacing/CC and "
            "application limits from a captured run; docs/explain.md):")


def markdown(m: Matrix, folder: str) -> str:
    lines = [f"# Stack matrix: {m.link} link", "", f"{scope_line(m)} The heatmap: plots/matrix.svg.", "", NOTE, "",
             md_table(table(m)), ""]
    why = why_lines(m, folder)
    lines += ["## Needs a why", "", why_intro(m), ""]
    lines += [f"- {w}" for w in why] if why else ["- none"]
    return "\n".join(lines) + "\n"
