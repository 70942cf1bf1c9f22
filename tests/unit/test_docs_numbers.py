"""The documents' numbers recomputed from the committed runs with this file's own arithmetic (issue 36, point 4).

`quiclab docs --check` proves the documents are what lab/stats, lab/report and lab/docgen render now; it cannot
catch a wrong method, because it renders with the same code. Here a few lines of their own (csv, statistics, math;
nothing of lab/stats nor lab/report) recompute cells the documents quote: medians, paired ratios and their QUIC/TCP
order, a censored run's bound at its own end, the Reno check's threshold and its verdicts, the atlas's medians in
QUIC / TCP order; and the folders' run keys are checked against the plan their manifest states.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "results" / "reference"
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results.md"
SEEDS = ROOT / "docs" / "seeds.md"
OBSERVED = ("netns sysctl", "process command line")  # sender cc read back, not a default or a claim


def runs(preset: str) -> list[dict[str, str]]:
    with (REF / preset / "runs.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def sig3(v: float) -> str:
    decimals = max(0, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{decimals}f}"


def block(path: Path, name: str) -> list[dict[str, str]]:
    """The markdown table inside `<!-- generated: NAME -->` of a document, as rows of column -> cell; the last
    table in the block when it holds several."""
    text = path.read_text(encoding="utf-8")
    m = re.search(rf"<!-- generated: {name} -->\n(.*?)<!-- end generated: {name} -->", text, re.DOTALL)
    assert m, f"{path.name} has no generated block {name}"
    tables = re.findall(r"((?:^\|.*\|\n)+)", m.group(1), re.MULTILINE)
    assert tables, f"{path.name} block {name} holds no table"
    lines = tables[-1].strip().splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[2:]]


def method(r: dict[str, str]) -> str:
    return f"{ {'h1': 'HTTP/1.1', 'h2': 'HTTP/2', 'h3': 'HTTP/3'}[r['protocol']]} {r['client']}→{r['server']}"


def test_every_sweep_folder_holds_each_planned_run_exactly_once() -> None:
    """The plan from the manifest (points x repeats x protocols x client/server pairs): no key twice, none that was
    not planned, every planned one present, and each key naming its own row's columns."""
    checked = 0
    for folder in sorted(p for p in REF.iterdir() if (p / "runs.csv").is_file()):
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        if manifest.get("preset") != folder.name:
            continue  # benchmark folders (bench parallel, startup, degraded set-up) have their own tests
        s = manifest["scenario"]
        pairs = [tuple(p.replace(" ", "").split(">")) for p in s["pairs"]] or list(
            itertools.product(s["clients"], s["servers"]))
        # a stack matrix: HTTP/3 over every pair, HTTP/1.1 and HTTP/2 over its TCP baseline pairs only
        tcp = [tuple(p.replace(" ", "").split(">")) for p in s.get("tcp_pairs") or []] if s.get("matrix") else pairs
        planned = {f"{p['index']}/{proto}/{c}/{srv}/{rep}" for p in manifest["points"] for proto in s["protocols"]
                   for c, srv in (pairs if proto == "h3" else tcp) for rep in range(manifest["repeats"])}
        rows = runs(folder.name)
        keys = [r["run_key"] for r in rows]
        twice = [k for k, n in Counter(keys).items() if n > 1]
        assert not twice, f"{folder.name}: run keys recorded twice: {twice[:5]}"
        assert not set(keys) - planned, f"{folder.name}: runs never planned: {sorted(set(keys) - planned)[:5]}"
        assert not planned - set(keys), f"{folder.name}: planned runs missing: {sorted(planned - set(keys))[:5]}"
        assert len(planned) == manifest["planned_runs"], folder.name
        for r in rows:
            assert r["run_key"] == f"{r['point']}/{r['protocol']}/{r['client']}/{r['server']}/{r['repeat']}", r
        checked += 1
    assert checked >= 20, f"only {checked} sweep folders"


def test_the_readmes_medians_are_the_runs_own() -> None:
    """connectify-loss: every median time and goodput of the README's table, 36 cells. A failed run is censored
    at its own end: its time is at least its total_s and its goodput at most its size over that time; where such
    a bound lies beyond the median (checked), the median is the order statistic computed with the bound itself."""
    by: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in runs("connectify-loss"):
        by.setdefault((r["point_label"], method(r)), []).append(r)
    rows = block(README, "medians-connectify-loss")
    assert len(rows) == len(by) == 18
    for row in rows:
        rs = by[(row["parameter"], row["method"])]
        censored = [r for r in rs if r["status"] != "ok"]
        assert row["n"] == str(len(rs)) and row["censored"].split()[0] == str(len(censored))
        times = [float(r["total_s"]) for r in rs]
        goodputs = [float(r["goodput_bps"]) / 1e6 if r["status"] == "ok"
                    else int(r["size_bytes"]) * 8 / float(r["total_s"]) / 1e6 for r in rs]
        median_time, median_goodput = statistics.median(times), statistics.median(goodputs)
        for r in censored:  # the bound must not be the median, else the median itself is only bounded
            assert float(r["total_s"]) > median_time
            assert int(r["size_bytes"]) * 8 / float(r["total_s"]) / 1e6 < median_goodput
        assert row["time s median [IQR]"].split()[0] == sig3(median_time)
        assert row["goodput Mbit/s median [IQR]"].split()[0] == sig3(median_goodput), row


def test_the_paired_ratios_put_quic_over_tcp_repeat_by_repeat() -> None:
    """The README's HTTP/3 / TCP ratios: the median over repeats of HTTP/3's time over TCP's at the same repeat
    (12 cells); swapping the two sides, or pairing across repeats, changes them."""
    t = {(r["point_label"], r["protocol"], r["repeat"]): float(r["total_s"]) for r in runs("connectify-loss")}
    rows = block(README, "ratios-connectify-loss")
    assert len(rows) == 12
    for row in rows:
        num, den = (p.strip() for p in row["comparison"].split(" / "))
        assert num == "HTTP/3", row
        tcp = {"HTTP/1.1": "h1", "HTTP/2": "h2"}[den]
        ratio = statistics.median(t[(row["parameter"], "h3", str(i))] / t[(row["parameter"], tcp, str(i))]
                                  for i in range(5))
        assert row["time ratio"] == sig3(ratio), row


def test_a_failed_run_is_censored_at_its_own_end_in_every_column() -> None:
    """connectify-loss's HTTP/3 run at 5 % that aborted (curl: QUIC connection shut down) long before its timeout:
    the time CI ends above its own end, not above the timeout; the goodput CI starts below size / that end."""
    rs = [r for r in runs("connectify-loss") if r["point_label"] == "loss=5%" and r["protocol"] == "h3"]
    [failed] = [r for r in rs if r["status"] == "failed"]
    end, size, timeout = float(failed["total_s"]), int(failed["size_bytes"]), float(failed["timeout_s"])
    assert end < timeout
    [row] = [x for x in block(README, "medians-connectify-loss")
             if x["parameter"] == "loss=5%" and x["method"] == "HTTP/3 curl→nginx"]
    assert row["time CI"].endswith(f">{sig3(end)}"), row["time CI"]
    assert row["goodput CI"].startswith(f"<{sig3(size * 8 / end / 1e6)}"), row["goodput CI"]


def test_the_reno_checks_goodput_is_the_medians_tables_figure_and_a_censored_group_prints_a_bound() -> None:
    """One definition per figure: in every group of nginx-versions and connectify-cc the Reno check's goodput is
    the medians table's figure for the same group (censored runs included there), and where the group holds a failed
    or timed-out run its CI starts with a bound, printed as one ("<"). (Which group holds a censored run depends on
    the committed runs: the synthetic case is tests/unit/test_loss_response.py's
    test_failed_and_timed_out_runs_count_censored_in_every_column.)"""
    compared = 0
    for name in ("nginx-versions", "connectify-cc"):
        medians = {(x["parameter"], x["method"]): x for x in block(RESULTS, f"medians-{name}")}
        censored = {(r["point_label"], r["protocol"], r["client"], r["server"]) for r in runs(name)
                    if r["status"] in ("failed", "timeout")}
        for check in block(RESULTS, f"cc-{name}"):
            row = medians.get((check["parameter"], check["method"]))
            if row is None:  # (a check per sender CC where the medians table has one row per method: not this one)
                continue
            assert check["goodput Mbit/s"] == row["goodput Mbit/s median [IQR]"].split()[0], (name, check)
            compared += 1
            if any(p == check["parameter"] and check["method"].endswith(f"{c}→{s}") for p, _, c, s in censored):
                assert check["CI"].startswith("<"), "a CI end on a censored run is a bound, printed as one"
    assert compared >= 4, compared


def _mathis_ratio(r: dict[str, str]) -> float | None:
    """goodput / (MSS/RTT x sqrt(3/2)/sqrt(p)) with p and MSS from the link's counters (docs/results.md)."""
    sent, drops = int(r["link_down_sent_pkts"] or 0), int(r["link_down_loss_drops"] or 0)
    if not sent or not drops or r["status"] != "ok":
        return None
    delivered = sent - drops - int(r["link_down_queue_drops"] or 0)
    mss = int(r["wire_down_bytes"]) / delivered - (28 if r["protocol"] == "h3" else 52)
    model = mss * 8 / float(r["rtt_s"]) * math.sqrt(1.5) / math.sqrt(drops / sent)
    return float(r["goodput_bps"]) / model if model < 0.5 * float(r["rate_bps"]) else None


def _threshold_in(path: Path, name: str) -> float:
    text = path.read_text(encoding="utf-8")
    m = re.search(rf"<!-- generated: {name} -->\n(.*?)<!-- end generated", text, re.DOTALL)
    assert m, name
    found = re.search(r"= (\d+\.\d+)x", m.group(1))
    assert found, f"{name} states no threshold"
    return float(found.group(1))


def test_the_reno_threshold_is_twice_the_highest_honest_median_of_the_committed_validate_reno() -> None:
    """Recomputed from validate-reno's runs.csv: senders read back as reno, runs flagged host-bound left out, per
    point and method the median ratio to the model; the threshold docs/results.md and every check state is twice the
    highest of them (a stale or typed number fails)."""
    by: dict[tuple[str, str], list[float]] = {}
    for r in runs("validate-reno"):
        if r["cc_sender"] == "reno" and r["cc_sender_source"].startswith(OBSERVED) and not r["host_bound"]:
            ratio = _mathis_ratio(r)
            if ratio is not None:
                by.setdefault((r["point_label"], method(r)), []).append(ratio)
    assert len(by) >= 6
    want = 2 * max(statistics.median(v) for v in by.values())
    assert _threshold_in(RESULTS, "threshold-validate-reno") == pytest.approx(want, abs=0.006)
    assert _threshold_in(README, "cc-connectify-cc") == pytest.approx(want, abs=0.006)


def _ci_low(cell: str) -> tuple[str, float]:
    m = re.match(r"([<>]?)(\d+(?:\.\d+)?)", cell)
    assert m, cell
    return m.group(1), float(m.group(2))


def _cc_blocks() -> list[tuple[Path, str]]:
    return [(p, n) for p in (README, RESULTS)
            for n in re.findall(r"<!-- generated: (cc-[a-z0-9-]+) -->", p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize(("path", "name"), _cc_blocks())
def test_a_reno_claim_is_refuted_only_where_its_whole_ci_lies_above_the_threshold(path: Path, name: str) -> None:
    threshold = _threshold_in(path, name)
    rows = block(path, name)
    assert rows
    for row in rows:
        bound, low = _ci_low(row["CI"])
        whole_above = bound == "" and low > threshold
        if row["verdict"].startswith("REFUTED"):
            assert whole_above, row
        elif row["sender cc"].split()[0] in ("reno", "newreno") and "rate-limited" not in row["verdict"]:
            assert not whole_above, row


def test_the_atlas_prints_quic_then_tcp() -> None:
    """docs/seeds.md, Connectify (a), arm default: the lab's medians are HTTP/3's then HTTP/1.1's, as computed here
    from connectify-loss (12 cells); the two swapped fail."""
    t: dict[tuple[str, str], list[float]] = {}
    for r in runs("connectify-loss"):
        t.setdefault((r["point_label"], r["protocol"]), []).append(float(r["total_s"]))
    text = SEEDS.read_text(encoding="utf-8")
    section = text[text.index("### (a) Loss"):text.index("### (b)")]
    seen = 0
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 8 and cells[3] == "default" and cells[0].endswith("%"):
            point = "loss=" + cells[0].replace(" ", "")
            quic, tcp = re.match(r"(\S+) s / (\S+) s", cells[4]).groups()  # type: ignore[union-attr]
            assert quic == sig3(statistics.median(t[(point, "h3")])), line
            assert tcp == sig3(statistics.median(t[(point, "h1")])), line
            seen += 1
    assert seen == 6


def test_no_document_that_describes_results_renders_not_run_yet() -> None:
    """A generated block in README.md or docs/results.md (prose around it reads it) must have its folder: a block
    rendering "Not run yet" is a result the text speaks of without data. The atlas's notes, likewise. The one
    exception is the stack matrix's blocks (lab/docgen/matrix.py; issue 33): one per link, run and published one link
    at a time, their prose states no result (it says where the folder's numbers appear), and a link not published
    yet says so with the command that makes it."""
    pending = re.compile(r"matrix(grid|summary)?-")
    for path in (README, RESULTS):
        blocks = re.findall(r"<!-- generated: (\S+) -->\n(.*?)<!-- end generated", path.read_text(encoding="utf-8"),
                            re.DOTALL)
        assert blocks
        empty = [name for name, body in blocks if "not run yet" in body.lower() and not pending.match(name)]
        assert not empty, f"{path.name}: blocks without a committed folder: {empty}"
    notes = [line for line in SEEDS.read_text(encoding="utf-8").splitlines() if line.startswith("- ")
             and "(not run yet)" in line]
    assert not notes, notes


def test_every_committed_explanation_has_its_two_drop_counts_in_agreement() -> None:
    """docs/explain.md says the counted and the emulator's drops agree in every committed worked example."""
    records = sorted(REF.glob("explain-*/evidence/*/explain.json"))
    assert records
    for p in records:
        path = json.loads(p.read_text(encoding="utf-8"))["path"]
        for direction in ("down", "up"):
            d = path[direction]
            assert d["agree"] is True, (p, direction)


def test_the_prose_on_the_sender_states_the_verdicts_of_its_generated_table() -> None:
    """docs/results.md, "The sender decides": the verdict the prose names per algorithm at 5 % loss (same algorithm
    on both sides, gtlsclient→ngtcp2 against curl→nginx) is the generated table's."""
    text = RESULTS.read_text(encoding="utf-8")
    prose = text[text.index("### The sender decides"):text.index("<!-- generated: verdicts-connectify-cc -->")]
    table = {row["parameter"]: row["lab says"] for row in block(RESULTS, "verdicts-connectify-cc")
             if row["QUIC"] == "HTTP/3 gtlsclient→ngtcp2"}
    said = re.findall(r"\*?(parity|no verdict|QUIC faster|QUIC slower)\*? for (BBR|Reno|CUBIC) at 5 %",
                      " ".join(prose.split()))
    assert len(said) == 3, said
    for verdict, cc in said:
        assert table[f"cc={cc.lower()} loss=5%"] == verdict, (cc, verdict)


def test_documents_quote_only_sentences_the_readme_has() -> None:
    """A sentence quoted as the README's must be in the README (one was quoted twice after it had gone)."""
    readme = " ".join(README.read_text(encoding="utf-8").split())
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = " ".join(path.read_text(encoding="utf-8").split())
        for quote in re.findall(r"\(README[^)]*?\"([^\"]+)\"|\"([^\"]+)\" \(README", text):
            q = next(x for x in quote if x)
            assert q.rstrip(".") in readme, f"{path.name} quotes the README: {q!r}"


def test_the_readmes_opening_quotes_no_link_figure_without_committed_data() -> None:
    """results/bench/*.json is not committed: the README's first paragraphs state no forwarding figure (they point
    to `quiclab bench link`)."""
    opening = README.read_text(encoding="utf-8").split("## The two commands")[0]
    assert not re.search(r"\d\s*Gbit/s|\d+(?:\.\d+)?-\d+(?:\.\d+)? of the kernel", opening), opening
    assert "quiclab bench link" in opening


def test_the_default_forwarding_the_docs_name_is_the_one_every_reference_folder_ran() -> None:
    manifests = {p.parent.name: json.loads(p.read_text(encoding="utf-8")) for p in REF.glob("*/manifest.json")}
    kinds = {m.get("link_forwarding") for m in manifests.values() if m.get("shaper") != "netem"} - {None}
    assert kinds == {"threaded-napi"}, kinds
    # a folder shaped by netem (in the VM: docs/link.md) forwards in the kernel, as the README says
    netem = {name: m.get("link_forwarding") for name, m in manifests.items() if m.get("shaper") == "netem"}
    assert set(netem.values()) <= {"kernel (netem)"}, netem
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert all(f"{name}, shaped by netem" in readme for name in netem), netem
    for path in (ROOT / "docs" / "benchmarks.md", ROOT / "docs" / "link.md", ROOT / "lab" / "link" / "napi.py"):
        text = " ".join(path.read_text(encoding="utf-8").split())
        assert not re.search(r"default stays `?off|By default \(`QUICLAB_LINKEM_NAPI=off`\)", text), path.name


def test_a_payload_time_quoted_is_the_payload_over_the_rate() -> None:
    """docs/seeds.md: 10 MB at 10 Mbit/s is 8.0 s of payload (8.4 s only with the packets' headers)."""
    text = " ".join(SEEDS.read_text(encoding="utf-8").split())
    quoted = re.findall(r"10 MB(?: payload)? (?:at 10 Mbit/s )?alone (?:is|takes) (\d+(?:\.\d+)?) s", text)
    assert quoted
    assert all(float(q) == pytest.approx(10e6 * 8 / 10e6) for q in quoted), quoted
