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
