"""Connectify's open questions (seed 000), answered from committed folders (lab/docgen/answers.py assembles them).

1. **A capped QUIC window**: the seed's rtt table implies gQUIC moved a flat ~200 kB per round trip (object size /
   (QUIC time / RTT)). connectify-rtt-window and connectify-rate-window rerun connectify-rtt-cubic and
   connectify-rate-cubic with the QUIC client's flow-control window fixed at 200 kB. Per seed point: the seed's QUIC
   time and its implied bytes per RTT (from docs/seeds.toml, the seed's own numbers); the lab's capped QUIC median
   time with its CI and the bytes per RTT it implies (the same formula at the median: a censored median gives a
   bound); lab/seed QUIC time with the CI of the median divided by the seed's time, inside the atlas's +-10 % band
   or not; and QUIC/TCP by the one rule against the seed's direction; the uncapped folder beside it. The capped
   QUIC "lands on the seed's curve" where its time is within +-10 % of the seed's at >= 2/3 of the points
   (seed_verdict.REPRODUCED_SHARE), partly at one or more.
2. **The 0.1 % point explained**: connectify-loss-captured (0.1 % loss, 160 ms, 5 Mbit/s; h1 and h3 to nginx 1.26
   and nginx-sid 1.30, captured): per method the medians of what each run's explain.json says (lab/explain/model.py:
   the time split of its timeline, the loss response), and which part of the split differs most between the two
   servers' HTTP/3.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from lab.docgen.answer_stats import (
    Pick,
    band,
    compare,
    direction,
    est_text,
    folder_ref,
    inverse,
    judged_cell,
    median_text,
    n_text,
    not_measured,
    scaled,
    select,
    times,
)
from lab.docgen.atlas import Atlas, Experiment, Folder, Renderer, SeedPoint, same_direction
from lab.docgen.censored import explanation
from lab.docgen.seed_verdict import REPRODUCED_SHARE
from lab.explain.model import Explanation
from lab.plan import presets
from lab.report.summary import md_table
from lab.results.schema import RunRecord
from lab.sizes import parse_size
from lab.stats.fmt import EN
from lab.stats.stats import Est, Obs, describe

_RTT_POINT = re.compile(r"\brtt=(\d+(?:\.\d+)?)ms\b")
_RTT_CONDITIONS = re.compile(r"\bRTT (\d+(?:\.\d+)?) ms\b")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kMG]?B)\b")
KB = 1e-3  # bytes -> kB


@dataclass(frozen=True)
class WindowQuestion:
    experiment: str  # the atlas experiment (docs/seeds.toml) whose seed points and numbers it uses
    capped: str  # the folder with the QUIC window capped
    uncapped: str  # the same links and methods without the cap


RTT = WindowQuestion("connectify-rtt", "connectify-rtt-window", "connectify-rtt-cubic")
RATE = WindowQuestion("connectify-rate", "connectify-rate-window", "connectify-rate-cubic")
QUIC = Pick("", "h3", "gtlsclient", "ngtcp2")  # ngtcp2's CUBIC, as connectify-*-cubic
TCP = Pick("", "h1")  # TCP CUBIC curl -> nginx


def experiment(atlas: Atlas, exp_id: str) -> Experiment:
    return next(e for s in atlas.seeds for e in s.experiments if e.id == exp_id)


def seed_size(exp: Experiment) -> int:
    """The seed's object size: the first item of the experiment's conditions (e.g. "10 MB; ...")."""
    m = _SIZE.match(exp.conditions)
    if m is None:
        raise ValueError(f"{exp.id}: its conditions do not start with the object size")
    return parse_size(m.group(1) + m.group(2))


def seed_rtt_s(exp: Experiment, p: SeedPoint) -> float | None:
    """The seed's RTT at a point: the point's own (rtt=80ms), else the experiment's (conditions "RTT 20 ms")."""
    m = _RTT_POINT.search(p.point) or _RTT_CONDITIONS.search(exp.conditions)
    return float(m.group(1)) / 1000 if m else None


def per_rtt(size: int, rtt_s: float, t: Est) -> Est:
    """Bytes moved per round trip at a transfer time t: size / (t / RTT)."""
    return inverse(t, size * rtt_s)


@dataclass(frozen=True)
class LabSide:
    """One folder at one seed point: the QUIC runs (capped or not), TCP's, and how they compare."""

    quic: list[RunRecord]
    tcp: list[RunRecord]


def lab_side(f: Folder | None, p: SeedPoint) -> LabSide | None:
    if f is None:
        return None
    tokens = p.point.split()
    return LabSide(select(f.records, QUIC, tokens=tokens), select(f.records, TCP, tokens=tokens))


def vs_seed(runs: Sequence[RunRecord], seed_s: float) -> tuple[str, str]:
    """(lab/seed QUIC time [CI of the median / seed time, level], its band against +-10 %)."""
    d = describe(times(runs))
    if d is None or d.ci is None:
        return "-", "undecided"
    lo, hi = scaled(d.ci.lo, 1 / seed_s), scaled(d.ci.hi, 1 / seed_s)
    where = band(lo, hi)
    ci = f"{est_text(lo)}{EN}{est_text(hi)}, {d.ci.level * 100:.1f} %"
    return f"{est_text(scaled(d.median, 1 / seed_s))} [{ci}]", where


def quic_cell(side: LabSide, size: int, rtt_s: float | None) -> str:
    d = describe(times(side.quic))
    if d is None:
        return "no runs"
    moved = f" ({est_text(per_rtt(size, rtt_s, d.median), KB, 'kB')})" if rtt_s else ""
    return f"{median_text(times(side.quic), unit='s')}{moved}, n {n_text(side.quic)}"


@dataclass(frozen=True)
class WindowRow:
    cells: list[str]
    within_capped: str  # band of the capped QUIC's time against the seed's ("" without the folder)
    same_capped: str  # same_direction of capped QUIC/TCP with the seed's
    within_uncapped: str
    same_uncapped: str
    moved: Est | None  # the capped QUIC's bytes per RTT at its median


def window_row(exp: Experiment, p: SeedPoint, capped: LabSide | None, uncapped: LabSide | None) -> WindowRow:
    size, rtt = seed_size(exp), seed_rtt_s(exp, p)
    assert p.quic_s is not None and p.tcp_s is not None
    seed_moved = f" ({est_text(per_rtt(size, rtt, Est(p.quic_s)), KB, 'kB')})" if rtt else ""
    cells = [p.condition, f"{p.quic_s:g} / {p.tcp_s:g} s{seed_moved}"]
    out: list[tuple[str, str]] = []
    for side in (capped, uncapped):
        if side is None:
            cells += ["not yet measured", "", ""]
            out.append(("", ""))
            continue
        ratio, where = vs_seed(side.quic, p.quic_s)
        j = compare(side.quic, side.tcp)
        same = same_direction(p.seed_direction(), direction(j))
        cells += [quic_cell(side, size, rtt), f"{ratio}: {where}", f"{judged_cell(j)} (seed: {p.seed_direction()}; "
                                                                    f"same: {same})"]
        out.append((where, same))
    d = describe(times(capped.quic)) if capped is not None else None
    moved = per_rtt(size, rtt, d.median) if d is not None and rtt else None
    return WindowRow(cells, out[0][0], out[0][1], out[1][0], out[1][1], moved)


def lands(within: Sequence[str]) -> str:
    """Does the capped QUIC land on the seed's curve: yes (within +-10 % at >= REPRODUCED_SHARE of the points),
    partly (at one or more), no."""
    hit = sum(1 for w in within if w == "within")
    if within and Fraction(hit, len(within)) >= REPRODUCED_SHARE:
        return "yes"
    return "partly" if hit else "no"


def _range(values: Sequence[Est], scale: float, unit: str) -> str:
    exact = [v.value for v in values if v.exact and v.value is not None]
    if not exact:
        return "-"
    return f"{est_text(Est(min(exact)), scale)}{EN}{est_text(Est(max(exact)), scale)} {unit}"


def window_answer(r: Renderer, atlas: Atlas, q: WindowQuestion) -> list[str]:
    """One question's generated sentences and table."""
    exp = experiment(atlas, q.experiment)
    size = seed_size(exp)
    fc, fu = r.folder(q.capped), r.folder(q.uncapped)
    rows = [window_row(exp, p, lab_side(fc, p), lab_side(fu, p)) for p in exp.points if p.quic_s and p.tcp_s]
    seed_moved = [per_rtt(size, rtt, Est(p.quic_s)) for p in exp.points
                  if p.quic_s and (rtt := seed_rtt_s(exp, p))]
    n = len(rows)
    text = [f"The seed's QUIC moved {_range(seed_moved, KB, 'kB')} per round trip "
            f"(object size / (QUIC time / RTT), from the seed's table: docs/seeds.toml, experiment {exp.id})."]
    for name, ref, f, within, same in (
            ("Capped (QUIC window 200 kB)", q.capped, fc, [w.within_capped for w in rows],
             [w.same_capped for w in rows]),
            ("Uncapped", q.uncapped, fu, [w.within_uncapped for w in rows], [w.same_uncapped for w in rows])):
        if f is None:
            text.append(f"{name} ({folder_ref(ref)}): {not_measured(ref)}.")
            continue
        text.append(f"{name} ({folder_ref(ref)}): the lab's QUIC time is within +-10 % of the seed's (the CI of its "
                    f"median inside the band) at {within.count('within')} of {n} points (above at "
                    f"{within.count('above')}, below at {within.count('below')}, undecided at "
                    f"{within.count('undecided')}): lands on the seed's curve: **{lands(within)}**; QUIC/TCP goes "
                    f"the seed's way at {same.count('yes')} of {n} points.")
    if fc is not None:
        text.append(f"The capped QUIC moved {_range([w.moved for w in rows if w.moved], KB, 'kB')} per round trip "
                    "at its medians.")
    cols = ["seed point", "seed QUIC / TCP time (kB per RTT)", "capped: QUIC median [CI] (kB per RTT), n",
            "capped / seed QUIC time [CI]", "capped QUIC/TCP [CI]: lab says", "uncapped: QUIC median [CI] "
            "(kB per RTT), n", "uncapped / seed QUIC time [CI]", "uncapped QUIC/TCP [CI]: lab says"]
    return [" ".join(text), "", md_table((cols, [w.cells for w in rows])), ""]


# ---------------------------------------------------------------------------------------------------------------
# The 0.1 % point, from its captures

CAPTURED = "connectify-loss-captured"


def servers() -> tuple[str, str]:
    """The preset's two servers, the older nginx first (as the preset lists them: nginx 1.26, then nginx-sid)."""
    old, new = presets.get(CAPTURED).servers[:2]
    return old, new
Getter = Callable[[Explanation], float | int | None]
#: the time split of a run's timeline (lab/explain/timeline.py): handshake + loss recovery (stalled + resent) + rest
SPLIT: tuple[tuple[str, Getter], ...] = (
    ("handshake ms", lambda e: e.timeline.handshake_ms if e.timeline else None),
    ("stalled ms (link idle, a hole open)", lambda e: e.timeline.stalled_ms if e.timeline else None),
    ("resent ms (link time of re-sent bytes)", lambda e: e.timeline.resent_ms if e.timeline else None),
    ("rest ms", lambda e: e.timeline.rest_ms if e.timeline else None),
)
#: how the sentence names each part of the split
SPLIT_WORDS = {"handshake ms": "the handshake",
               "stalled ms (link idle, a hole open)": "the time the link sat idle while a loss was not yet repaired "
                                                      "(a hole open)",
               "resent ms (link time of re-sent bytes)": "the link time of the re-sent bytes",
               "rest ms": "the rest of the transfer"}
#: the loss response (explain.json loss and window)
RESPONSE: tuple[tuple[str, Getter], ...] = (
    ("data packets lost", lambda e: e.loss.data_packets_lost.value if e.loss else None),
    ("retransmissions", lambda e: e.loss.retransmissions.value if e.loss else None),
    ("spurious", lambda e: e.loss.spurious_retransmissions.value if e.loss else None),
    ("timeouts (PTO / RTO, TLP)", lambda e: e.loss.timeouts.value if e.loss else None),
    ("first loss repaired ms", lambda e: e.loss.first_loss_repair_ms.value if e.loss else None),
    ("loss episodes", lambda e: e.window.loss_episodes.value if e.window else None),
    ("flight reductions", lambda e: e.window.flight_reductions.value if e.window else None),
    ("flow-control-limited share", lambda e: e.window.flow_control_limited_share.value if e.window else None),
)


@dataclass(frozen=True)
class Explained:
    pick: Pick
    runs: list[RunRecord]
    explained: list[Explanation]
    version: str


def explained(f: Folder, protocol: str, server: str) -> Explained:
    pick = Pick(CAPTURED, protocol, server=server)
    runs = select(f.records, pick)
    exps = [e for e in (explanation(f.path, run) for run in runs) if e is not None and e.status == "explained"]
    impl = f.manifest.get("implementations")
    server_doc = impl.get(server) if isinstance(impl, dict) else None
    version = str(server_doc.get("version", server)) if isinstance(server_doc, dict) else server
    return Explained(pick, runs, exps, version)


def figure(ex: Explained, get: Getter) -> Est | None:
    """The median of one explain.json figure over the method's explained runs (None: no run shows it)."""
    d = describe([Obs(float(v)) for e in ex.explained if (v := get(e)) is not None])
    return d.median if d is not None else None


def figure_text(e: Est | None) -> str:
    """A median of counts or milliseconds: whole numbers as such (41, 9385), else three significant digits."""
    if e is not None and e.exact and e.value is not None and float(e.value).is_integer():
        return str(int(e.value))
    return est_text(e)


def explained_row(ex: Explained) -> list[str]:
    return [f"{ex.pick.method} ({ex.version})", n_text(ex.runs), median_text(times(ex.runs), unit="s"),
            f"{len(ex.explained)} of {len(ex.runs)}",
            *(figure_text(figure(ex, g)) for _, g in (*SPLIT, *RESPONSE))]


def largest_split(a: Explained, b: Explained) -> tuple[str, Est, Est] | None:
    """The part of the time split whose medians differ most between b and a."""
    best: tuple[float, str, Est, Est] | None = None
    for name, get in SPLIT:
        ea, eb = figure(a, get), figure(b, get)
        if ea is None or eb is None or not (ea.exact and eb.exact):
            continue
        assert ea.value is not None and eb.value is not None
        gap = abs(eb.value - ea.value)
        if best is None or gap > best[0]:
            best = (gap, name, eb, ea)
    return None if best is None else best[1:]


def response_text(ex: Explained) -> str:
    return f"{ex.pick.server}: " + ", ".join(f"{name} {figure_text(figure(ex, g))}" for name, g in RESPONSE)


def seed_line(atlas: Atlas) -> str:
    """The seed's own QUIC/TCP at 0.1 % loss (docs/seeds.toml, experiment connectify-loss)."""
    p = next(p for p in experiment(atlas, "connectify-loss").points if p.point == "loss=0.1%")
    ratio = p.seed_ratio()
    return (f"The seed (lines {p.lines}): QUIC {p.quic_s:g} s, TCP {p.tcp_s:g} s, QUIC/TCP "
            f"{'-' if ratio is None else f'{ratio:.2f}'} ({p.seed_direction()}).")


def captured_answer(r: Renderer, atlas: Atlas) -> list[str]:
    f = r.folder(CAPTURED)
    if f is None:
        return [f"{seed_line(atlas)} {folder_ref(CAPTURED)}: {not_measured(CAPTURED)}.", ""]
    a, b = servers()
    by = {(p, s): explained(f, p, s) for p in ("h1", "h3") for s in (a, b)}
    old, new = by[("h3", a)], by[("h3", b)]
    j = compare(new.runs, old.runs)  # the newer server's HTTP/3 time / the older's
    points = ", ".join(dict.fromkeys(x.point_label for x in f.records))
    text = [seed_line(atlas), f"From {folder_ref(CAPTURED)} (points: {points}): "
            f"HTTP/3 to {b} ({new.version}) / to {a} ({old.version}): "
            f"{judged_cell(j, (b, a))}."]
    for s in (a, b):
        js = compare(by[("h3", s)].runs, by[("h1", s)].runs)
        text.append(f"HTTP/3 / HTTP/1.1 with {s} ({by[('h3', s)].version}): {judged_cell(js)}.")
    split = largest_split(old, new)
    if split is not None:
        name, late, early = split
        text.append(f"Of the explained runs' time split (explain.json timeline: handshake, link idle with a hole "
                    f"open, re-sent bytes, the rest), the two servers' HTTP/3 medians differ most in "
                    f"{SPLIT_WORDS[name]}: {figure_text(late)} ms ({b}) vs {figure_text(early)} ms ({a}).")
    text.append("Their loss response (medians over the explained runs): " + "; ".join(
        response_text(x) for x in (new, old)) + ".")
    cols = ["method (server version)", "n", "median time [CI]", "explained", *(n for n, _ in (*SPLIT, *RESPONSE))]
    return [" ".join(text), "", md_table((cols, [explained_row(x) for x in by.values()])), ""]
