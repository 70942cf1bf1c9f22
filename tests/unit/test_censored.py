"""The censored runs' diagnoses (lab/docgen/censored.py): each rule on synthetic runs, and the committed seed folders
recomputed with this file's own arithmetic (csv, hashlib; nothing of lab/ for the expectations)."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path

import pytest

from lab.docgen import censored
from lab.docgen.atlas import Renderer, load_atlas
from lab.docgen.censored import Rerun, diagnose, exit_meaning, kind_of, rerun_command
from lab.explain.model import Explanation, Reason
from lab.results.objects_csv import ObjectRow
from lab.results.schema import RunRecord

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "results" / "reference"
SEEDS_MD = ROOT / "docs" / "seeds.md"
CMD = Rerun("quiclab sweep x --seed 1 --capture pcap,keylog,qlog --shard 1/2 --out results/censored", 2)


def record(**kw: object) -> RunRecord:
    """A 10 MB HTTP/3 run at 10 Mbit/s that failed after 60 s with 4 MB delivered; the link's counters as given."""
    base = dict(sweep="s", run_key="3/h3/curl/nginx/1", point=3, point_label="loss=1%", x_name="loss_pct", x=1.0,
                protocol="h3", client="curl", server="nginx", repeat=1, order=0, seed=7, shaper="linkem",
                rate_bps=10e6, rtt_s=0.1, loss_pct=1.0, jitter_s=0.0,
                link='{"downlink":{"queue_limit_bytes":100000,"reorder":false}}', size_bytes=10_000_000,
                status="failed", failure="client exit code 56: QUIC connection has been shut down", http_version="3",
                bytes=4_000_000, sha256_ok=False, handshake_s=0.1, ttfb_s=0.2, total_s=60.0, goodput_bps=None,
                wall_s=60.5, overhead_s=0.5, wire_down_bytes=4_200_000, wire_up_bytes=100_000, wire_overhead=0.43,
                cc_client="x", cc_server="y", started_at="t", timeout_s=300.0, link_down_sent_pkts=3500,
                link_down_loss_drops=35, link_down_queue_drops=0, link_up_sent_pkts=1500, link_up_loss_drops=15,
                link_up_queue_drops=0)
    base.update(kw)
    return RunRecord(**base)  # type: ignore[arg-type]


def test_a_link_idle_most_of_the_run_is_a_stalled_sender_that_needs_a_capture() -> None:
    d = diagnose(record(), rerun=CMD)  # 4.2 MB at 10 Mbit/s = 3.36 s of 60 s
    assert d.kind == "stalled" and not d.settled
    assert "3.36 s of its 10 Mbit/s" in d.reason and "idle 94%" in d.reason
    assert "40% of the 10 MB delivered" in d.reason and "curl: failure receiving network data" in d.reason
    assert "the link dropped 35 of 3500 packets toward the client (35 to its loss)" in d.reason
    assert d.rerun == CMD


def test_a_link_busy_to_the_end_settles_it_as_the_links_rate_and_drops_the_command() -> None:
    r = record(status="timeout", failure="client exit code 28: Operation timed out after 60000 milliseconds",
               total_s=60.0, timeout_s=60.0, wire_down_bytes=70_000_000, bytes=65_000_000, size_bytes=100_000_000)
    d = diagnose(r, rerun=CMD)  # 70 MB = 56 s of link time in 60 s
    assert d.kind == "link" and d.settled and d.rerun is None
    assert "busy 93% of it" in d.reason and "timed out after 60.0 s (its timeout 60 s)" in d.reason
    # the boundary: just under 80 % of the run is neither idle nor busy enough: the error text alone
    at = {"bytes": 50_000_000, "size_bytes": 100_000_000}
    assert kind_of(record(wire_down_bytes=int(0.79 * 60 * 10e6 / 8), **at), None) == "text"
    assert kind_of(record(wire_down_bytes=int(0.49 * 60 * 10e6 / 8), **at), None) == "stalled"


def test_data_crossing_the_link_many_times_without_drops_is_resent_data() -> None:
    r = record(total_s=8.0, wire_down_bytes=34_000_000, bytes=6_000_000, rate_bps=40e6, jitter_s=0.02,
               link='{"downlink":{"reorder":true}}', link_down_sent_pkts=28000, link_down_loss_drops=0)
    d = diagnose(r, rerun=CMD)
    assert d.kind == "resent" and not d.settled and d.rerun == CMD
    assert "(5.7x)" in d.reason and "jitter 20 ms, reorder on" in d.reason
    # the same bytes with the link dropping more than 1 % of what it was given: not "resent" (the link's busy share)
    assert kind_of(record(total_s=8.0, wire_down_bytes=34_000_000, bytes=6_000_000, rate_bps=40e6, status="timeout",
                          link_down_sent_pkts=28000, link_down_loss_drops=300), None) == "link"


def test_a_capture_explanation_comes_first_and_settles_it() -> None:
    e = Explanation(run_key="3/h3/curl/nginx/1", protocol="h3", transport="quic", status="explained",
                    reasons=[Reason(text="the server stopped after a key update"), Reason(text="second")])
    d = diagnose(record(), explained=e, rerun=CMD)
    assert d.kind == "captured" and d.settled and d.rerun is None
    assert "its capture says: the server stopped after a key update; second" in d.reason
    not_explained = Explanation.unexplainable("3/h3/curl/nginx/1", "h3", "no pcap")
    assert diagnose(record(), explained=not_explained).kind == "stalled"


def test_a_refused_connection_is_no_stall_and_a_busy_link_without_a_timeout_is_not_the_links_rate() -> None:
    refused = record(handshake_s=None, ttfb_s=None, bytes=0, wire_down_bytes=3000, total_s=0.05,
                     failure="client exit code 7: Failed to connect")
    assert kind_of(refused, None) == "text"
    assert "curl: could not connect" in diagnose(refused).reason
    assert kind_of(record(handshake_s=None, bytes=10), None) == "stalled"  # bytes came: a connection was made
    busy = {"wire_down_bytes": 70_000_000, "bytes": 65_000_000, "size_bytes": 100_000_000}
    assert kind_of(record(**busy), None) == "text"  # failed ("shut down") on a busy link: not a timeout
    assert kind_of(record(failure="object 1: curl exit code 28", **busy), None) == "link"
    # a handshake's few kB on the wire for nothing delivered: not re-sent data (less than the object crossed)
    assert kind_of(record(bytes=0, wire_down_bytes=9000, link_down_loss_drops=0, total_s=0.5), None) == "stalled"


def test_without_link_counters_only_the_error_text_is_left() -> None:
    d = diagnose(record(wire_down_bytes=None, link_down_sent_pkts=None, failure="server refused the connection"),
                 rerun=CMD)
    assert d.kind == "text" and d.rerun == CMD
    assert "server refused the connection" in d.reason and "the link dropped" not in d.reason
    assert kind_of(record(rate_bps=None), None) == "text"  # unshaped: no link time


def test_the_exit_code_gets_curls_meaning_once() -> None:
    assert exit_meaning("object 1: curl exit code 95") == "object 1: curl exit code 95 (curl: HTTP/3 layer error)"
    timed = "client exit code 28: Operation timed out after 60001 milliseconds"
    assert exit_meaning(timed) == timed  # the text already says it
    assert exit_meaning("client exit code 3: odd\nsecond line") == "client exit code 3: odd"
    assert exit_meaning("client exit code 56: closed", "gtlsclient") == "client exit code 56: closed"  # not curl's
    assert exit_meaning("client exit code 56: closed", "curl-sid").endswith("(curl: failure receiving network data)")


def test_heavy_queue_drops_rcvbuf_drops_and_the_host_flag_are_named() -> None:
    d = diagnose(record(link_down_sent_pkts=1000, link_down_queue_drops=400, client_rcvbuf_drops=12,
                        host_bound="cpu busy 0.97 >= 0.95"))
    assert "at its 100 kB queue" in d.reason and "its queue dropped 40% of what the sender put on it" in d.reason
    assert "receive buffer dropped 12 datagrams" in d.reason
    assert "flagged host-bound (cpu busy 0.97 >= 0.95)" in d.reason
    assert "its queue dropped" not in diagnose(record(link_down_queue_drops=99, link_down_sent_pkts=1000)).reason


def test_a_multi_object_run_names_the_object_that_failed_and_what_followed() -> None:
    r = record(failure="object 1: curl exit code 28", size_bytes=500_000, bytes=400_000, connections=2,
               total_s=60.4, wire_down_bytes=429_000)
    objs = [ObjectRow(r.run_key, "t", "0", 0.0, 0.1, 100_000, "3", True),
            ObjectRow(r.run_key, "t", "1", 0.1, 60.1, 0, "0", False),
            *[ObjectRow(r.run_key, "t", str(i), 60.1 + (i - 2) * 0.1, 60.2 + (i - 2) * 0.1, 100_000, "3", True)
              for i in (2, 3, 4)]]
    d = diagnose(r, objs)
    assert "object 1 (request 2 of 5) received 0 B from 0.10 s to 60.10 s" in d.reason
    assert "then the 3 after it completed in 0.30 s over 2 connections" in d.reason


def test_the_command_is_refused_when_the_preset_plans_another_seed() -> None:
    rows = {r["run_key"]: r for r in csv.DictReader((REF / "jitter-reorder" / "runs.csv").open())}
    row = next(iter(rows.values()))
    r = record(run_key=row["run_key"], point=int(row["point"]), repeat=int(row["repeat"]), seed=int(row["seed"]) + 1)
    assert rerun_command("jitter-reorder", 1, r).why_not.startswith("the current preset 'jitter-reorder' plans "
                                                                     "another link seed")
    assert "no longer plans it" in rerun_command("no-such-preset", 1, r).why_not


# ---------------------------------------------------------------------------------------------------------------
# The committed seed folders, with this file's own arithmetic


def _csv_runs(folder: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((folder / "runs.csv").open(encoding="utf-8")))


def _kind(row: dict[str, str]) -> str:
    """The rules restated on the raw row (no explain.json in these folders' censored runs: checked below)."""
    def num(k: str) -> float | None:
        return float(row[k]) if row.get(k) else None

    wire, sent, rate = num("wire_down_bytes"), num("link_down_sent_pkts"), num("rate_bps")
    end = num("total_s") or num("page_time_s") or num("timeout_s")
    dropped = (num("link_down_loss_drops") or 0) + (num("link_down_queue_drops") or 0)
    delivered, size = int(row["bytes"]), int(row["size_bytes"])
    if wire is not None and sent and wire >= 2 * delivered and wire > size and dropped <= 0.01 * sent:
        return "resent"
    connected = bool(row["handshake_s"]) or delivered > 0
    timed_out = row["status"] == "timeout" or "exit code 28" in row["failure"]
    if wire is not None and rate and end:
        share = wire * 8 / rate / end
        if share < 0.5 and connected:
            return "stalled"
        if share >= 0.8 and timed_out:
            return "link"
    return "text"


def _censored(folder: Path) -> list[dict[str, str]]:
    legacy = ("client exit code -1:", "could not run ")
    return [r for r in _csv_runs(folder) if r["status"] in ("failed", "timeout") and
            not (r["status"] == "failed" and r["failure"].startswith(legacy))]


@pytest.fixture(scope="module")
def generated() -> tuple[list[str], dict[str, list[str]]]:
    return censored.sections(Renderer(REF), load_atlas())


@pytest.mark.parametrize("preset", ["jitter-reorder", "yu-reuse", "yu", "connectify-loss"])
def test_a_committed_folders_censored_runs_match_runs_csv_and_the_rules(preset: str) -> None:
    folder = REF / preset
    if not (folder / "runs.csv").is_file():
        pytest.skip(f"no committed {folder}/runs.csv")
    f = Renderer(REF).folder(preset)
    assert f is not None
    got = censored.folder_censored(f)
    want = _censored(folder)
    assert sorted(d.run.run_key for d in got.diagnoses) == sorted(r["run_key"] for r in want)
    assert got.results == sum(1 for r in _csv_runs(folder) if r["status"] != "unsupported")
    by_key = {r["run_key"]: r for r in want}
    for d in got.diagnoses:
        assert not list((folder / "evidence").glob(f"{d.run.run_key.replace('/', '_')}/explain.json"))
        assert d.kind == _kind(by_key[d.run.run_key]), d.run.run_key
        assert str(d.run.seed) == by_key[d.run.run_key]["seed"]


@pytest.mark.parametrize("preset", ["jitter-reorder", "yu-reuse", "yu", "connectify-loss"])
def test_each_command_reruns_exactly_the_runs_group_with_its_link_seed(preset: str) -> None:
    folder = REF / preset
    if not (folder / "runs.csv").is_file():
        pytest.skip(f"no committed {folder}/runs.csv")
    f = Renderer(REF).folder(preset)
    assert f is not None
    rows = _csv_runs(folder)
    groups = sorted({(int(r["point"]), int(r["repeat"])) for r in rows})  # a complete folder holds the whole plan
    scenario_seed = f.manifest["seed"]
    for d in censored.folder_censored(f).diagnoses:
        assert d.rerun is not None and d.rerun.command, d.rerun
        m = re.fullmatch(rf"quiclab sweep {preset} --seed (\d+) --capture pcap,keylog,qlog --shard (\d+)/(\d+) "
                         r"--out results/censored", d.rerun.command)
        assert m, d.rerun.command
        seed, k, g = (int(x) for x in m.groups())
        assert (seed, g) == (scenario_seed, len(groups))
        assert groups[k - 1] == (d.run.point, d.run.repeat)
        digest = hashlib.sha256(f"{seed}:{d.run.point}:{d.run.repeat}".encode()).digest()
        assert int.from_bytes(digest[:8], "big") % 2**63 == d.run.seed  # the plan's link seed rule, restated
        assert d.rerun.runs == sum(1 for r in rows if (int(r["point"]), int(r["repeat"])) == groups[k - 1])


def test_the_total_line_counts_every_seed_folders_censored_runs(
        generated: tuple[list[str], dict[str, list[str]]]) -> None:
    atlas = load_atlas()
    folders = sorted({p.parent for seed in atlas.seeds for p in REF.glob("*/runs.csv")
                      if p.parent.name.split("-")[0] in {a.preset.split("-")[0] for e in seed.experiments
                                                         for a in e.arms}
                      and json.loads((p.parent / "manifest.json").read_text()).get("preset") == p.parent.name})
    n = sum(len(_censored(f)) for f in folders)
    results = sum(1 for f in folders for r in _csv_runs(f) if r["status"] != "unsupported")
    total, per_seed = generated
    line = next(x for x in total if x.startswith("Censored runs in the seed folders:"))
    assert line.startswith(f"Censored runs in the seed folders: {n} of {results} results in {len(folders)} folders")
    assert sum(int(re.search(r"Censored runs: (\d+) of", "\n".join(v))[1]) for v in per_seed.values()) == n
    text = SEEDS_MD.read_text(encoding="utf-8")
    assert line in text  # docs/seeds.md states it (`quiclab docs --check` checks the rest)


def test_a_committed_rerun_joins_the_diagnosis_and_replaces_the_command(tmp_path: Path) -> None:
    from lab.results.schema import csv_text

    explained = Explanation(run_key="3/h3/curl/nginx/1", protocol="h3", transport="quic", status="explained",
                            reasons=[Reason(text="no packet from the server for 60 s")])
    folder = tmp_path / f"{censored.RERUN_PREFIX}jitter-reorder-17of20"
    (folder / "evidence" / "3_h3_curl_nginx_1").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"preset": "jitter-reorder"}))
    (folder / "evidence" / "3_h3_curl_nginx_1" / "explain.json").write_text(explained.model_dump_json())
    (folder / "runs.csv").write_text(csv_text([record(evidence="evidence/3_h3_curl_nginx_1/client-side.pcap")]))
    found = censored.agains(tmp_path)
    again = found[("jitter-reorder", "3/h3/curl/nginx/1", 7)]
    assert again.folder == f"results/reference/{folder.name}" and again.explained is not None
    d = diagnose(record(), rerun=CMD, again=again)  # failed again, explained: captured
    assert d.kind == "captured" and d.settled and d.rerun is None and d.rerun_folder == again.folder
    assert "re-run with the same link seed" in d.reason and "no packet from the server for 60 s" in d.reason
    ok = censored.Again(again.folder, record(status="ok", failure="", total_s=9.5), explained)
    d = diagnose(record(), rerun=CMD, again=ok)  # completed this time: not explained by it, and nothing to re-run
    assert d.kind == "stalled" and not d.settled and d.rerun is None
    assert "completed in 9.50 s, so the failure did not recur" in d.reason
    assert "its capture says: no packet from the server" in d.reason  # (what the completed re-run's capture shows)
