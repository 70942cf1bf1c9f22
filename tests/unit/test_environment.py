"""Host checks that do not need the lab: UDP buffer sizes for QUIC."""

from lab.run import environment


def test_small_udp_buffers_are_named(monkeypatch):
    values = {"net.core.rmem_default": 212992, "net.core.rmem_max": 16 << 20, "net.core.wmem_max": None}
    monkeypatch.setattr(environment, "_sysctl", values.get)
    problems = environment.udp_buffer_problems()
    assert len(problems) == 1  # rmem_max is fine; an unreadable setting is not reported as a problem
    assert problems[0].startswith("net.core.rmem_default is 212992")
    assert "sysctl -w net.core.rmem_default=" in problems[0]


def test_enough_udp_buffers_are_quiet(monkeypatch):
    monkeypatch.setattr(environment, "_sysctl", lambda name: 1 << 30)
    assert environment.udp_buffer_problems() == []
