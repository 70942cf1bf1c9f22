"""`quiclab run` without a lab: its one-point plan (one run per protocol, in the order asked, with the sweep's
settings), which the sweep's runner then runs (the real transfers: tests/lab/test_foundation.py)."""

from __future__ import annotations

from lab.cli.run import _runs
from lab.plan.support import why_unsupported
from lab.protocols import Protocol


def test_quiclab_run_is_a_one_point_plan_in_the_order_asked():
    runs = _runs([Protocol.H3, Protocol.H1], "1MB", "curl", "nginx", "cubic", None, 30.0, ("pcap",))
    assert [r.protocol for r in runs] == [Protocol.H3, Protocol.H1]
    assert {r.point.index for r in runs} == {0} and {r.repeat for r in runs} == {0}
    assert all(r.point.size == 1_000_000 and r.point.settings.cc == "cubic" for r in runs)
    assert len({r.seed for r in runs}) == 1  # one link seed: the protocols are paired as in a sweep


def test_quiclab_run_asks_the_sweeps_support_check():
    h2, h3 = _runs([Protocol.H2, Protocol.H3], "1kB", "curl", "ngtcp2", None, None, 30.0, ())
    assert "ngtcp2 does not speak HTTP/2" in why_unsupported(h2) and why_unsupported(h3) == ""
