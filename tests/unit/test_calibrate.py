"""Base-path calibration: what is kept and how it reads (the measurement itself needs the lab: tests/lab)."""

from lab.link import calibrate
from lab.link.calibrate import BasePath


def _bp(path: str = "linkem", note: str = "") -> BasePath:
    return BasePath(path=path, rtt_median_s=0.0004, rtt_min_s=0.0002, rtt_p90_s=0.0009, samples=100,
                    rtt_q25_s=0.0003, down_s=0.00015, up_s=0.00015, measured_at="2026-11-23T00:00:00Z",
                    router_start="boot:1", note=note)


def test_kept_per_path_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setattr(calibrate, "STATE_FILE", tmp_path / "calibration.json")
    assert calibrate.load() == {}
    calibrate.save(_bp("linkem"))
    calibrate.save(_bp("kernel"))
    assert calibrate.load() == {"linkem": _bp("linkem"), "kernel": _bp("kernel")}
    facts = calibrate.manifest_facts()
    assert set(facts["paths"]) == {"linkem", "kernel"} and facts["paths"]["linkem"]["down_s"] == 0.00015


def test_an_unreadable_or_older_file_is_no_calibration(tmp_path, monkeypatch):
    f = tmp_path / "calibration.json"
    monkeypatch.setattr(calibrate, "STATE_FILE", f)
    f.write_text("{not json")
    assert calibrate.load() == {}
    f.write_text('{"linkem": {"path": "linkem", "rtt_median_s": 0.0003}}')
    assert calibrate.load() == {}


def test_line_says_what_is_subtracted_or_why_not():
    assert "subtracted per direction: down 0.150 ms, up 0.150 ms" in _bp().line()
    assert "lower quartile 0.300 ms" in _bp().line()
    assert _bp(note="busy").line() == "lab path (linkem): not subtracted: busy"


def test_off_switch(monkeypatch):
    monkeypatch.setenv(calibrate.ENV_CALIBRATE, "off")
    assert not calibrate.enabled()
    assert calibrate.path_delays("linkem") == (0.0, 0.0)
    monkeypatch.setenv(calibrate.ENV_CALIBRATE, "on")
    assert calibrate.enabled()


def _measure_with_stand_ins(monkeypatch, tmp_path, netem: bool) -> tuple[BasePath, list[str]]:
    """calibrate.measure over stand-in router, linkem and docker: pings of 2.6-3.4 ms; the router's commands kept."""
    from lab import docker
    from lab.link import linkem, router
    from lab.link.model import Link

    events: list[str] = []
    monkeypatch.setattr(calibrate, "STATE_FILE", tmp_path / "calibration.json")
    monkeypatch.setattr(router, "path", lambda fresh=False: "kernel")
    monkeypatch.setattr(router, "set_path", lambda p: events.append(f"path {p}"))
    monkeypatch.setattr(router, "has_netem", lambda: netem)
    monkeypatch.setattr(router, "interfaces", lambda: router.Interfaces(client_side="c0", server_side="s0"))
    monkeypatch.setattr(router, "try_run", lambda *cmd: (events.append(" ".join(cmd)), (0, ""))[1])
    monkeypatch.setattr(linkem, "apply", lambda link, *a: Link())
    monkeypatch.setattr(linkem, "current", lambda: Link())

    def ping(container, argv, **kw):
        events.append("ping")
        return "".join(f"64 bytes: icmp_seq={i} time={2.6 + 0.8 * i / 99:.3f} ms\n" for i in range(100))

    monkeypatch.setattr(docker, "exec_in", ping)
    return calibrate.measure("kernel", "boot:1"), events


def test_the_netem_path_is_measured_through_netem_and_its_probe_delay_taken_off(monkeypatch, tmp_path):
    bp, events = _measure_with_stand_ins(monkeypatch, tmp_path, netem=True)
    at = events.index("ping")
    assert any("netem" in e and "delay 1000us" in e and "dev c0" in e for e in events[:at])
    assert any("netem" in e and "delay 1000us" in e and "dev s0" in e for e in events[:at])
    assert any("tc qdisc del" in e for e in events[at:]), "the probe's netem is removed after the pings"
    assert not any("netem" in e and "delay" in e for e in events[at:])
    assert abs(bp.rtt_q25_s - 0.0008) < 0.00002  # the pings' lower quartile 2.8 ms minus 2 x 1 ms
    assert abs(bp.down_s - 0.0004) < 0.00001


def test_without_netem_the_kernel_path_is_measured_as_it_is(monkeypatch, tmp_path):
    import pytest

    with pytest.raises(calibrate.Disturbed, match=r"lower quartile 2\.80 ms"):  # nothing taken off: 2.8 ms > 2 ms
        _measure_with_stand_ins(monkeypatch, tmp_path, netem=False)
