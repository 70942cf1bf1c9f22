"""Link settings for queue disciplines and the netem-like stages: spec parsing, the model's rules, linkem's JSON,
the description, and bad values from the CLI (exit 2, one line)."""

import json
import subprocess
import sys

import pytest

from lab.errors import UsageError
from lab.link import describe, linkem
from lab.link.model import Codel, Direction, FqCodel, Link, Pie, Slot
from lab.link.spec import LINK_KEYS, parse_link
from lab.link.spec_stages import STAGE_KEYS


def test_every_stage_key_is_a_link_key():
    assert set(STAGE_KEYS) <= set(LINK_KEYS)
    assert "keep_state" in LINK_KEYS


def test_stage_settings_parse():
    link = parse_link({"delay": "10ms", "jitter": "2ms", "jitter_interval": "20ms", "reorder_prob": "25%",
                       "reorder_gap": "5", "duplicate": "1%", "corrupt": "0.5%", "ge_after": "1%,30%",
                       "loss_ecn": "yes", "qdisc": "codel:target=3ms:interval=50ms:ecn=yes",
                       "slot": "5ms:1ms:normal:packets=4:bytes=12kB", "overhead": "-4", "mpu": "64",
                       "keep_state": "yes"})
    d = link.downlink
    assert d == link.uplink
    assert (d.jitter_interval_s, d.reorder_prob, d.reorder_gap) == (0.02, 0.25, 5)
    assert (d.duplicate, d.corrupt, d.loss_ecn) == (0.01, 0.005, True)
    assert d.loss_after.mean == pytest.approx(0.01 / 0.31)
    assert d.qdisc == Codel(target_s=0.003, interval_s=0.05, ecn=True)
    assert d.slot == Slot(delay_s=0.005, jitter_s=0.001, dist="normal", packets=4, bytes=12000)
    assert (d.overhead_bytes, d.mpu_bytes) == (-4, 64)
    assert link.keep_state


@pytest.mark.parametrize(("spec", "want"), [
    ("fq_codel", FqCodel()),
    ("fq_codel:flows=64:quantum=300:ecn=no", FqCodel(flows=64, quantum=300, ecn=False)),
    ("pie:target=20ms:tupdate=30ms:alpha=0.25:beta=2:burst=0:bytemode=yes",
     Pie(target_s=0.02, tupdate_s=0.03, alpha=0.25, beta=2.0, max_burst_s=0.0, bytemode=True)),
])
def test_qdisc_parameters(spec, want):
    assert parse_link({"qdisc": spec}).downlink.qdisc == want


def test_per_direction_stage_settings():
    link = parse_link({"rate": "10mbit"}, down={"qdisc": "fq_codel"}, up={"duplicate": "2%"})
    assert link.downlink.qdisc.kind == "fq_codel" and link.uplink.qdisc.kind == "drop_tail"
    assert (link.downlink.duplicate, link.uplink.duplicate) == (0.0, 0.02)


@pytest.mark.parametrize(("spec", "needle"), [
    ({"qdisc": "red"}, "'red'"),
    ({"qdisc": "codel:target=-1ms"}, "'-1ms'"),
    ({"qdisc": "codel:flows=8"}, "'flows=8'"),
    ({"qdisc": "drop_head:limit=5"}, "drop_head takes none"),
    ({"qdisc": "pie:alpha=3"}, "0..2"),
    ({"qdisc": "fq_codel:quantum=10"}, "256..1048576"),
    ({"slot": "fast"}, "'fast'"),
    ({"slot": "5ms:1ms:cauchy"}, "'cauchy'"),
    ({"slot": "5ms:size=4"}, "'size=4'"),
    ({"slot": "0ms"}, "'0ms'"),
    ({"duplicate": "150%"}, "'150%'"),
    ({"corrupt": "x"}, "'x'"),
    ({"reorder_prob": "10%"}, "needs a delay"),
    ({"delay": "5ms", "reorder_gap": "0"}, "'0'"),
    ({"loss_after": "1%", "ge_after": "1%,30%"}, "not both"),
    ({"loss_ecn": "maybe"}, "'maybe'"),
    ({"overhead": "-2000"}, "'-2000'"),
    ({"mpu": "1.5"}, "'1.5'"),
    ({"jitter_interval": "0"}, "'0'"),
    ({"queue": "0bdp"}, "'0bdp'"),
    ({"queue": "xbdp"}, "'xbdp'"),
    ({"keep_state": "sometimes"}, "'sometimes'"),
])
def test_bad_stage_values_name_the_value(spec, needle):
    with pytest.raises(UsageError) as e:
        parse_link(spec)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_queue_in_bdps_of_the_whole_path():
    link = parse_link({"rate": "100mbit", "queue": "1.5bdp"}, down={"delay": "15ms"}, up={"delay": "5ms"})
    # 12.5 MB/s x 20 ms x 1.5, both directions
    assert link.queue_limit_bytes(link.downlink) == link.queue_limit_bytes(link.uplink) == 375000
    assert link.queue_limit_bytes(parse_link({"queue": "2bdp"}).downlink) is None  # unlimited rate: no queue


def test_linkem_json_round_trip_and_path_delay():
    link = parse_link({"rate": "20mbit", "rtt": "40ms", "qdisc": "pie:ecn=yes", "slot": "2ms:packets=3",
                       "duplicate": "1%", "corrupt": "1%", "reorder_prob": "10%", "loss_after": "2%",
                       "overhead": "14", "mpu": "64", "jitter": "3ms", "jitter_interval": "15ms"})
    doc = linkem.to_json(link, (0.0002, 0.0003))
    assert doc["downlink"]["path_delay_us"] == 200 and doc["uplink"]["path_delay_us"] == 300
    assert doc["downlink"]["qdisc"] == {"kind": "pie", "target_us": 15000, "tupdate_us": 15000, "alpha": 0.125,
                                        "beta": 1.25, "max_burst_us": 150000, "ecn": True, "bytemode": False}
    assert doc["downlink"]["queue_limit_bytes"] == 100000
    back = linkem.from_json(json.loads(json.dumps(doc)))
    want = link.model_copy(update={d: getattr(link, d).model_copy(update={"queue_bytes": 100000})
                                   for d in ("downlink", "uplink")})
    assert back == want
    assert linkem.path_delays_in_force(doc) == (0.0002, 0.0003)


def test_linkem_json_from_an_older_linkem():
    old = {"seed": 3, "downlink": {"rate_bps": None, "delay_us": 5000, "jitter_us": 0, "jitter_dist": "uniform",
                                   "reorder": False, "loss": {"model": "none"}, "queue_limit_packets": None,
                                   "queue_limit_bytes": None, "outages": None, "rate_schedule": None,
                                   "trace_ms": None}}
    old["uplink"] = old["downlink"]
    link = linkem.from_json(old)
    assert link.downlink == Direction(delay_s=0.005)
    assert linkem.path_delays_in_force(old) == (0.0, 0.0)


def test_description_names_the_stages():
    link = parse_link({"rate": "10mbit", "delay": "5ms", "qdisc": "fq_codel", "duplicate": "1%", "slot": "2ms",
                       "reorder_prob": "5%", "loss_after": "1%", "queue": "2bdp"})
    row = describe.rows(link)[0]
    assert "fq_codel target 5 ms, ecn" in row[5] and "2 BDP" in row[5]
    for part in ("duplicate 1 %", "reorder 5 % gap 1", "loss after the link 1 %", "slots every 2 ms"):
        assert part in row[6]
    assert describe.rows(Link())[0][6] == "-"


@pytest.mark.parametrize(("args", "needle"), [
    (["shape", "--qdisc", "red"], "'red'"),
    (["shape", "--slot", "5ms:size=4"], "'size=4'"),
    (["shape", "--corrupt", "101%"], "'101%'"),
    (["shape", "--reorder-prob", "10%"], "needs a delay"),
    (["shape", "--queue", "0.5xbdp"], "'0.5xbdp'"),
])
def test_shape_bad_values_exit_2_with_one_line(args, needle):
    r = subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, timeout=60,
                       env={"QUICLAB_CALIBRATE": "off", "PATH": "/nonexistent"})
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_a_link_without_new_stages_is_the_older_json():
    # An older linkem rejects unknown fields: a link using none of the newer ones must not send them.
    doc = linkem.to_json(parse_link({"rate": "10mbit", "rtt": "20ms", "loss": "1%"}))
    older = {"rate_bps", "delay_us", "jitter_us", "jitter_dist", "reorder", "loss", "queue_limit_packets",
             "queue_limit_bytes", "outages", "rate_schedule", "trace_ms"}
    assert set(doc) == {"seed", "downlink", "uplink"}
    assert set(doc["downlink"]) == older and set(doc["uplink"]) == older
    assert linkem.from_json(doc) == linkem.from_json(linkem.to_json(parse_link({"rate": "10mbit", "rtt": "20ms",
                                                                                "loss": "1%"})))
