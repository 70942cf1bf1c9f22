"""The `quic_window` run dimension: parsed once, unsupported where a client cannot fix its window, given to the
client's wrapper only for h3 (lab/endpoints/quic_window.py)."""

from __future__ import annotations

import pytest

from lab.endpoints import quic_window
from lab.errors import UsageError
from lab.plan.plan import plan
from lab.plan.scenario import Scenario
from lab.plan.settings import parse_settings
from lab.plan.support import why_unsupported
from lab.protocols import Protocol


def test_a_window_is_a_size_of_at_least_4_kB():
    assert quic_window.parse_quic_window("200kB") == 200_000
    assert parse_settings({"quic_window": "1MB"}).quic_window == 1_000_000
    assert quic_window.parse_quic_window("off") is None  # the client's own window at that point
    for bad in ("2kB", "lots", "-1"):
        with pytest.raises(UsageError, match="quic_window"):
            quic_window.parse_quic_window(bad)


def test_only_a_client_that_can_fix_its_window_runs_h3_with_one():
    assert quic_window.unsupported(200_000, "gtlsclient", Protocol.H3) is None
    assert "curl cannot fix" in (quic_window.unsupported(200_000, "curl", Protocol.H3) or "")
    assert quic_window.unsupported(200_000, "curl", Protocol.H1) is None  # TCP: not affected
    assert quic_window.unsupported(None, "curl", Protocol.H3) is None
    assert "bulk" in (quic_window.unsupported(200_000, "gtlsclient", Protocol.H3, "0rtt") or "")


def test_the_wrapper_gets_the_window_for_h3_only():
    assert quic_window.client_env(200_000, Protocol.H3) == {"QUIC_WINDOW": "200000"}
    assert quic_window.client_env(200_000, Protocol.H2) == {}
    assert quic_window.client_env(None, Protocol.H3) == {}


def test_a_scenario_plans_the_window_and_rules_out_what_cannot_fix_it():
    s = Scenario(name="w", protocols=["h1", "h3"], clients=["curl", "gtlsclient"], servers=["nginx", "ngtcp2"],
                 pairs=["curl>nginx", "curl>ngtcp2", "gtlsclient>ngtcp2"], sizes=["1MB"], repeats=1,
                 quic_window="200kB")
    runs = plan(s)
    assert {r.point.settings.quic_window for r in runs} == {200_000}
    why = {(r.client, r.server, r.protocol.value): why_unsupported(r) for r in runs}
    assert why[("gtlsclient", "ngtcp2", "h3")] == ""
    assert why[("curl", "nginx", "h1")] == ""
    assert "quic_window" in why[("curl", "ngtcp2", "h3")]
