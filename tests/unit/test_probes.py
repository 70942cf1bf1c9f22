"""The per-run probes (lab/run/probes.py): each owns its columns, once; the record is built from them."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from lab.adverse.run import Conditions
from lab.link.counters import parse_linkem
from lab.results.schema import COLUMNS, RunRecord
from lab.run import probes
from lab.run.runner import identity, not_run
from tests.unit.test_loss_response import METRICS


def test_every_probe_column_is_a_runs_csv_column_owned_by_one_probe():
    assert set(probes.PROBE_COLUMNS) <= set(COLUMNS)
    assert len(probes.PROBE_COLUMNS) == len(set(probes.PROBE_COLUMNS))
    assert [type(p) for p in probes.probes()] == [probes.LinkCounters, probes.SenderCC, probes.SenderSocket,
                                                  probes.PcapGoodput, probes.SenderResponse, probes.WorkloadColumns,
                                                  probes.AdverseEvents]


def test_link_counters_give_their_columns_only_and_none_without_counters():
    before = parse_linkem(METRICS)
    after = parse_linkem(METRICS.replace('"tcp"} 100\n', '"tcp"} 300\n'))
    p = probes.LinkCounters(start=before, end=after)
    rc = SimpleNamespace(result=None, run=SimpleNamespace(point=SimpleNamespace(size=1000)), size=1000)
    cols = p.columns(rc, {})  # type: ignore[arg-type]
    assert set(cols) <= set(probes.LinkCounters.COLUMNS) and cols["link_down_sent_pkts"] is not None
    assert cols["wire_overhead"] == (cols["wire_down_bytes"] + cols["wire_up_bytes"]) / 1000
    assert probes.LinkCounters(start=before, end=None).columns(rc, {}) == {}  # type: ignore[arg-type]


def test_a_run_without_adverse_conditions_has_no_adverse_columns():
    assert Conditions().columns(True, "") == {}


def test_an_unsupported_record_is_built_once_from_identity_and_outcome():
    from lab.plan.checks import validate
    from lab.plan.plan import plan
    from lab.run.runner import Context

    run = plan(validate({"name": "u", "repeats": 1, "sizes": ["1kB"], "protocols": ["h2"],
                         "clients": ["gtlsclient"]}, "test"))[0]
    ctx = Context(sweep="u", shaper="linkem", cc={}, timeout_for=lambda r: 10)
    rec = RunRecord(**identity(run, ctx, "linkem", run.link(), "2026-01-01T00:00:00Z"), **not_run("why"))
    assert rec.status == "unsupported" and rec.failure == "why" and rec.run_key == run.key
    assert dataclasses.fields(rec)  # a complete record: every field has a value


def test_the_sender_socket_probe_starts_nothing_for_quic_or_uncaptured_runs():
    from lab.protocols import Protocol

    p = probes.SenderSocket()
    for ev, proto in ((None, Protocol.H2), (SimpleNamespace(kinds=("pcap",)), Protocol.H3),
                      (SimpleNamespace(kinds=("keylog",)), Protocol.H2)):
        p.before(SimpleNamespace(ev=ev, protocol=proto))  # type: ignore[arg-type]
        assert p.watch is None
    p.close()  # nothing to stop: no error


def _snap(udp: int) -> object:
    from lab.link.counters import Counters, Snapshot

    return Snapshot(Counters(0, 0), Counters(0, 0), {"udp": udp, "tcp": 0})


def test_a_quiet_link_starts_the_run_at_once_and_a_previous_runs_tail_is_waited_out(monkeypatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(probes.time, "sleep", sleeps.append)
    last = _snap(1000)
    quiet = _snap(1010)  # 10 packets since the last run ended: nothing to wait for
    assert probes.settle("linkem", quiet, last) is quiet and sleeps == []  # type: ignore[arg-type]
    reads = iter([_snap(1400), _snap(1450), _snap(1450)])  # a QUIC server's tail, then quiet
    monkeypatch.setattr(probes, "wire_counters", lambda backend: next(reads))
    start = probes.settle("linkem", _snap(1300), last)  # type: ignore[arg-type]
    assert start is not None and start.by_protocol["udp"] == 1450 and len(sleeps) == 3
    assert probes.settle("linkem", quiet, None) is quiet  # type: ignore[arg-type]  # a sweep's first run


def test_a_run_with_competing_flows_does_not_wait_for_a_quiet_link(monkeypatch) -> None:
    """Competing flows start with the run's conditions, before its probes: waiting for quiet would let them run
    alone for the whole wait (the fairness test saw its shares change)."""
    monkeypatch.setattr(probes, "wire_counters", lambda backend: _snap(5000))
    monkeypatch.setattr(probes, "settle", lambda *a: (_ for _ in ()).throw(AssertionError("waited")))
    p = probes.LinkCounters()
    p.before(SimpleNamespace(backend="linkem", other_traffic=False, adv=SimpleNamespace(flows=object()),  # type: ignore[arg-type]
                             state=probes.ProbeState(_snap(0))))
    assert p.start is not None and p.start.by_protocol["udp"] == 5000


def test_the_last_runs_end_is_kept_per_sweep(monkeypatch) -> None:
    """Each sweep (each runner Context, each lab's worker, `quiclab run`) waits out its own previous run's tail."""
    monkeypatch.setattr(probes, "wire_counters", lambda backend: _snap(700))
    mine, other = probes.ProbeState(), probes.ProbeState()
    probes.LinkCounters().after(SimpleNamespace(backend="linkem", state=mine))  # type: ignore[arg-type]
    assert mine.last_end is not None and mine.last_end.by_protocol["udp"] == 700 and other.last_end is None
