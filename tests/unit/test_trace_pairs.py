"""Recorded trace pairs as links (issue 35 item 4): `traces = NAME` shapes the downlink with NAME.down and the uplink
with NAME.up from ../shared/traces beside the clone (or a path stem); a run's record keeps a trace as its count,
period and digest, not its entries; the `cellular` preset plans both shared LTE traces in their directions."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from lab import config
from lab.errors import UsageError
from lab.link import linkem
from lab.link.spec import parse_link, read_trace, recorded_pairs
from lab.plan.plan import plan, points
from tests.shared_files import LTE_PAIRS, get_preset

SHARED = LTE_PAIRS


@pytest.fixture
def traces_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "cell.down").write_text("1\n1\n2\n4\n")
    (tmp_path / "cell.up").write_text("2\n4\n")
    (tmp_path / "lonely.down").write_text("1\n")  # no .up: not a pair
    monkeypatch.setattr(config, "TRACES_DIR", tmp_path)
    return tmp_path


def test_a_named_pair_shapes_each_direction_with_its_own_trace(traces_dir: Path) -> None:
    link = parse_link({"traces": "cell", "rtt": "40ms"})
    assert link.downlink.trace_ms == [1, 1, 2, 4] and link.uplink.trace_ms == [2, 4]
    assert link.downlink.delay_s == link.uplink.delay_s == 0.02
    assert recorded_pairs() == ["cell"]


def test_a_path_stem_with_a_slash_is_read_where_it_points(tmp_path: Path) -> None:
    (tmp_path / "own.down").write_text("5\n10\n")
    (tmp_path / "own.up").write_text("10\n")
    link = parse_link({"traces": str(tmp_path / "own")})
    assert link.downlink.trace_ms == [5, 10] and link.uplink.trace_ms == [10]


@pytest.mark.parametrize("value", ["lonely", "nope", ""])
def test_an_unknown_pair_names_the_recorded_ones(traces_dir: Path, value: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_link({"traces": value})
    assert str(e.value).startswith(f"unknown trace pair {value!r}: allowed are cell (recorded in ")


def test_traces_and_trace_together_are_refused(traces_dir: Path) -> None:
    for down in ({"trace": str(traces_dir / "cell.down")}, None):
        common = {"traces": "cell"} if down else {"traces": "cell", "trace": str(traces_dir / "cell.down")}
        with pytest.raises(UsageError, match="give either traces"):
            parse_link(common, down)


def test_a_record_keeps_a_trace_as_its_count_period_and_digest(traces_dir: Path) -> None:
    link = parse_link({"traces": "cell", "rate": "5mbit"}, up={"rate": "1mbit"})
    doc = linkem.record_json(link)
    digest = hashlib.sha256((traces_dir / "cell.down").read_bytes()).hexdigest()
    assert doc["downlink"]["trace_ms"] == {"entries": 4, "period_ms": 4, "sha256": digest}
    assert doc["uplink"]["trace_ms"]["entries"] == 2
    assert {k: v for k, v in doc["downlink"].items() if k != "trace_ms"} == \
        {k: v for k, v in linkem.to_json(link)["downlink"].items() if k != "trace_ms"}
    plain = parse_link({"rate": "5mbit"})
    assert linkem.record_json(plain) == linkem.to_json(plain)


def test_the_cellular_preset_runs_both_lte_traces_in_their_directions() -> None:
    s = get_preset("cellular")
    pts = points(s)
    assert sorted((p.label.split()[0], p.size) for p in pts) == sorted(
        (f"traces={n}", size) for n in SHARED for size in (10**6, 10**7))
    for p in pts:
        name = p.label.split()[0].removeprefix("traces=")
        assert p.link.downlink.trace_ms == read_trace(config.TRACES_DIR / f"{name}.down")
        assert p.link.uplink.trace_ms == read_trace(config.TRACES_DIR / f"{name}.up")
        assert p.link.rtt_s == pytest.approx(0.040)
    mean = {p.label.split()[0]: (p.link.downlink.effective_rate_bps, p.link.uplink.effective_rate_bps) for p in pts}
    assert mean["traces=TMobile-LTE-short"] == pytest.approx((16.7e6, 13.3e6), rel=0.01)  # the README's averages
    assert mean["traces=ATT-LTE-driving-2016"] == pytest.approx((4.6e6, 1.9e6), rel=0.01)
    runs = plan(s)
    assert len(runs) == 60 and {r.protocol.value for r in runs} == {"h1", "h2", "h3"}
    assert "pcap" in s.capture  # the delivered-bytes curves come from the client-side capture
    assert "keylog" in s.capture  # and `quiclab explain` decrypts the QUIC runs' captures with the client's keys
    record = json.dumps(linkem.record_json(pts[0].link))
    assert len(record) < 2000  # not the 350,000 entries of a TMobile pair
