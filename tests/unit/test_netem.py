import pytest

from lab.errors import UsageError
from lab.link.model import Direction, GilbertElliott, Link, Outage
from lab.link.netem import (
    NetemPlan,
    NetemUnsupported,
    apply_script,
    classify_tc_error,
    clear_commands,
    netem_seed,
    plan,
    probe_command,
    unsupported_features,
)
from lab.link.spec import parse_link

CLIENT, SERVER = "eth1", "eth2"
HIGH_RATE = "100000000000bit"


def _plan(common, down=None, up=None) -> NetemPlan:
    return plan(parse_link(common, down, up), CLIENT, SERVER)


def _netem(p: NetemPlan, dev: str) -> list[str]:
    (cmd,) = [c for c in p.commands if c[2] == "replace" and c[4] == dev and "netem" in c]
    return cmd


def _tbf(p: NetemPlan, dev: str) -> list[str] | None:
    cmds = [c for c in p.commands if c[2] == "replace" and c[4] == dev and "tbf" in c]
    assert len(cmds) <= 1
    return cmds[0] if cmds else None


def _opt(cmd: list[str], key: str) -> str:
    return cmd[cmd.index(key) + 1]


def _after(cmd: list[str], key: str, n: int) -> list[str]:
    i = cmd.index(key)
    return cmd[i + 1:i + 1 + n]


def test_connectify_like_link_exact_commands():
    link = parse_link({"rtt": "160ms", "rate": "5mbit", "loss": "1%"})
    p = plan(link, CLIENT, SERVER)
    q = link.queue_limit_bytes(link.downlink)
    assert q == 100000
    limit = _opt(_netem(p, CLIENT), "limit")
    def root(dev: str) -> list[list[str]]:  # IPv4 to band 1:2 (the link), the rest (ARP, IPv6) past it
        return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "prio", "bands", "2",
                 "priomap", *["0"] * 16],
                ["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "matchall",
                 "classid", "1:2"]]
    assert p.commands == [
        *root(CLIENT),
        ["tc", "qdisc", "replace", "dev", CLIENT, "parent", "1:2", "handle", "2:", "netem",
         "limit", limit, "delay", "80000us", "loss", "random", "1%", "seed", str(netem_seed(1, "downlink"))],
        ["tc", "qdisc", "replace", "dev", CLIENT, "parent", "2:1", "handle", "10:", "tbf",
         "rate", "5000000bit", "burst", "3028", "limit", str(q)],
        *root(SERVER),
        ["tc", "qdisc", "replace", "dev", SERVER, "parent", "1:2", "handle", "2:", "netem",
         "limit", limit, "delay", "80000us", "loss", "random", "1%", "seed", str(netem_seed(1, "uplink"))],
        ["tc", "qdisc", "replace", "dev", SERVER, "parent", "2:1", "handle", "10:", "tbf",
         "rate", "5000000bit", "burst", "3028", "limit", str(q)],
    ]
    assert int(limit) >= 1000
    assert all(c[0] == "tc" for c in p.commands)
    assert all(isinstance(a, str) for c in p.commands for a in c)
    assert any("limit" in n for n in p.notes)


def test_per_direction_differences():
    p = _plan({"rtt": "100ms"}, down={"rate": "20mbit", "loss": "2%"}, up={"rate": "1mbit", "delay": "10ms"})
    down, up = _netem(p, CLIENT), _netem(p, SERVER)
    assert _after(down, "delay", 1) == ["50000us"] and _after(up, "delay", 1) == ["10000us"]
    assert _after(down, "loss", 2) == ["random", "2%"] and "loss" not in up
    assert _opt(_tbf(p, CLIENT), "rate") == "20000000bit"
    assert _opt(_tbf(p, SERVER), "rate") == "1000000bit"


def test_gemodel_argument_order_is_p_r_loss_bad_loss_good():
    link = Link(downlink=Direction(loss=GilbertElliott(p=0.02, r=0.25, loss_good=0.001, loss_bad=0.9)))
    cmd = _netem(plan(link, CLIENT, SERVER), CLIENT)
    # tc's "1-h" is the loss probability in the bad state, "1-k" the one in the good state
    assert _after(cmd, "loss", 5) == ["gemodel", "2%", "25%", "90%", "0.1%"]


def test_gemodel_from_spec_defaults():
    cmd = _netem(_plan({"ge": "1%,30%"}), CLIENT)
    assert _after(cmd, "loss", 5) == ["gemodel", "1%", "30%", "100%", "0%"]


def test_percent_formatting_has_no_float_noise():
    assert _after(_netem(_plan({"loss": "7%"}), CLIENT), "loss", 2) == ["random", "7%"]
    assert _after(_netem(_plan({"loss": "0.01%"}), CLIENT), "loss", 2) == ["random", "0.01%"]


def test_jitter_keeps_order_with_a_high_netem_rate():
    cmd = _netem(_plan({"delay": "40ms", "jitter": "5ms"}), CLIENT)
    assert _after(cmd, "delay", 2) == ["40000us", "5000us"]
    assert "distribution" not in cmd  # uniform is netem's table-less default
    assert _opt(cmd, "rate") == HIGH_RATE


def test_jitter_keeps_order_even_when_tbf_shapes():
    p = _plan({"delay": "40ms", "jitter": "5ms", "rate": "10mbit"})
    assert _opt(_netem(p, CLIENT), "rate") == HIGH_RATE
    assert _opt(_tbf(p, CLIENT), "rate") == "10000000bit"


def test_jitter_with_reorder_has_no_netem_rate():
    cmd = _netem(_plan({"delay": "40ms", "jitter": "5ms", "reorder": "yes"}), CLIENT)
    assert "rate" not in cmd


def test_no_jitter_no_netem_rate():
    assert "rate" not in _netem(_plan({"delay": "40ms", "rate": "10mbit"}), CLIENT)


@pytest.mark.parametrize("dist", ["normal", "pareto", "paretonormal"])
def test_distribution_mapping(dist):
    cmd = _netem(_plan({"delay": "40ms", "jitter": "5ms", "dist": dist}), CLIENT)
    assert _after(cmd, "delay", 4) == ["40000us", "5000us", "distribution", dist]


def test_distribution_with_zero_delay_uses_one_microsecond():
    p = _plan({"jitter": "5ms", "dist": "normal"})
    assert _after(_netem(p, CLIENT), "delay", 4) == ["1us", "5000us", "distribution", "normal"]
    assert any("1 us" in n for n in p.notes)


def test_uniform_jitter_with_zero_delay_stays_zero():
    assert _after(_netem(_plan({"jitter": "5ms"}), CLIENT), "delay", 2) == ["0us", "5000us"]


def test_tbf_only_with_a_rate():
    p = _plan({"delay": "20ms", "loss": "1%"})
    assert _tbf(p, CLIENT) is None and _tbf(p, SERVER) is None


def test_tbf_limit_is_the_models_queue_limit():
    for spec in ({"rtt": "160ms", "rate": "5mbit"}, {"rtt": "400ms", "rate": "50mbit"},
                 {"rate": "1mbit"}, {"rate": "10mbit", "queue": "256kB"}):
        link = parse_link(spec)
        tbf = _tbf(plan(link, CLIENT, SERVER), CLIENT)
        assert int(_opt(tbf, "limit")) == link.queue_limit_bytes(link.downlink)


def test_tbf_limit_in_packets_is_packets_times_1500():
    tbf = _tbf(_plan({"rate": "10mbit", "queue": "100p"}), CLIENT)
    assert _opt(tbf, "limit") == "150000"


def test_tbf_limit_takes_the_smaller_of_packets_and_bytes():
    link = Link(downlink=Direction(rate_bps=10**7, queue_packets=100, queue_bytes=50000))
    assert _opt(_tbf(plan(link, CLIENT, SERVER), CLIENT), "limit") == "50000"


def test_tbf_burst_two_frames_at_low_rates_one_ms_at_high_rates():
    assert _opt(_tbf(_plan({"rate": "5mbit"}), CLIENT), "burst") == "3028"
    assert _opt(_tbf(_plan({"rate": "1gbit"}), CLIENT), "burst") == "125000"


def test_netem_limit_at_least_1000_and_grows_with_delay():
    def limit(spec):
        return int(_opt(_netem(_plan(spec), CLIENT), "limit"))

    assert limit({"loss": "1%"}) == 1000
    assert limit({"rate": "1mbit", "delay": "1ms"}) >= 1000
    small, big = limit({"rate": "100mbit", "delay": "50ms"}), limit({"rate": "100mbit", "delay": "500ms"})
    assert 1000 <= small < big
    assert limit({"rate": "100mbit", "delay": "50ms", "jitter": "20ms"}) > small
    assert limit({"rate": "100mbit", "delay": "500ms"}) > limit({"rate": "10mbit", "delay": "500ms"})


def test_netem_limit_covers_the_delay_line_and_the_tbf_queue():
    link = parse_link({"rate": "100mbit", "rtt": "400ms"})
    n = int(_opt(_netem(plan(link, CLIENT, SERVER), CLIENT), "limit"))
    in_flight_full_size = 100e6 / 8 * 0.2 / 1500
    queued_min_size = link.queue_limit_bytes(link.downlink) / 64
    assert n >= 2 * in_flight_full_size + queued_min_size


def test_netem_limit_assumes_a_high_rate_when_unlimited():
    n = int(_opt(_netem(_plan({"delay": "100ms"}), CLIENT), "limit"))
    assert n >= 10e9 / 8 * 0.1 / 1500


def test_seeds_per_direction():
    p = plan(parse_link({"delay": "10ms", "seed": "42"}), CLIENT, SERVER)
    # scrambled per direction (tests/unit/test_netem_seed.py: why), decimal u64 as tc takes them
    assert _opt(_netem(p, CLIENT), "seed") == str(netem_seed(42, "downlink"))
    assert _opt(_netem(p, SERVER), "seed") == str(netem_seed(42, "uplink"))
    p = plan(Link(downlink=Direction(delay_s=0.01), uplink=Direction(delay_s=0.01), seed=2**64 - 1),
             CLIENT, SERVER)
    seeds = {int(_opt(_netem(p, dev), "seed")) for dev in (CLIENT, SERVER)}
    assert len(seeds) == 2 and all(0 <= x < 2**64 for x in seeds)
    assert any("seed" in n for n in p.notes)


def test_unimpaired_direction_gets_no_command():
    # the caller runs clear_commands() first (deleting both roots), then every plan command must succeed
    p = _plan({}, down={"rate": "5mbit"})
    assert [c for c in p.commands if SERVER in c] == []
    assert _netem(p, CLIENT) and _tbf(p, CLIENT)
    # qdiscs replaced; the one filter added (the clear deleted the root and its filters with it)
    assert [c[1:3] for c in p.commands] == [["qdisc", "replace"], ["filter", "add"], ["qdisc", "replace"],
                                            ["qdisc", "replace"]]
    assert any("uplink" in n and "no impairment" in n for n in p.notes)


def test_plan_never_contains_deletes():
    for spec in ({}, {"rate": "5mbit"}, {"delay": "10ms", "jitter": "1ms"}, {"loss": "1%"}):
        assert all(c[2] in ("replace", "add") and "del" not in c for c in _plan(spec).commands)


def test_no_effect_settings_do_not_count_as_impairment():
    p = _plan({"loss": "0%", "reorder": "yes", "dist": "normal", "queue": "100p", "outage": "10s:0ms"})
    assert p.commands == []


def test_default_link_has_no_commands():
    assert plan(Link(), CLIENT, SERVER).commands == []


def test_clear_and_probe_commands():
    assert clear_commands("a", "b") == [["tc", "qdisc", "del", "dev", "a", "root"],
                                        ["tc", "qdisc", "del", "dev", "b", "root"]]
    assert probe_command("dummy0") == ["tc", "qdisc", "add", "dev", "dummy0", "root", "netem", "delay", "1ms"]


def test_interfaces_must_differ():
    with pytest.raises(ValueError):
        plan(Link(), "eth0", "eth0")


@pytest.mark.parametrize(("common", "down", "up", "field"), [
    ({"outage": "10s:200ms"}, None, None, "downlink.outage"),
    ({"rate": "10mbit"}, None, {"spikes": "5s:200ms:10%"}, "uplink.rate_schedule"),
    ({"rate": "10mbit"}, {"spikes": "5s:200ms:10%"}, None, "downlink.rate_schedule"),
    ({"jitter": "3s"}, None, None, "downlink.jitter_s"),
])
def test_unsupported_features_raise_one_line(common, down, up, field):
    link = parse_link(common, down, up)
    assert field in unsupported_features(link)
    with pytest.raises(NetemUnsupported) as e:
        plan(link, CLIENT, SERVER)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"netem backend cannot emulate {field} (")
    assert msg.endswith("use --shaper linkem")
    assert isinstance(e.value, UsageError) and e.value.exit_code == 2


def test_trace_is_unsupported(tmp_path):
    trace = tmp_path / "t.trace"
    trace.write_text("1\n2\n3\n")
    link = parse_link({"delay": "10ms"}, down={"trace": str(trace)})
    assert unsupported_features(link) == ["downlink.trace_ms"]
    with pytest.raises(NetemUnsupported, match=r"downlink\.trace_ms"):
        plan(link, CLIENT, SERVER)


def test_first_unsupported_field_is_named():
    link = Link(downlink=Direction(outage=Outage(period_s=10, down_s=1)),
                uplink=Direction(trace_ms=[1, 2]))
    assert unsupported_features(link) == ["downlink.outage", "uplink.trace_ms"]
    with pytest.raises(NetemUnsupported, match=r"downlink\.outage \(periodic outages\)"):
        plan(link, CLIENT, SERVER)


def test_supported_link_has_no_unsupported_features():
    assert unsupported_features(parse_link({"rtt": "160ms", "rate": "5mbit", "ge": "1%,30%"})) == []


@pytest.mark.parametrize(("stderr", "kind"), [
    ("", "ok"),
    ("  \n", "ok"),
    ("Warning: something harmless\n", "ok"),
    ("Error: Specified qdisc kind is unknown.\n", "no-netem"),
    ("Error: Specified qdisc not found.\n", "no-netem"),
    ("RTNETLINK answers: No such file or directory\n", "no-netem"),
    ('Unknown qdisc "netem", hence option "delay" is unparsable\n', "no-netem"),
    ("Error: Failed to find specified qdisc.\n", "no-netem"),
    ('What is "seed"?\nUsage: ... netem [ limit PACKETS ]\n', "syntax"),
    ('Illegal "loss gemodel p"\n', "syntax"),
    ("distribution specified but no latency and jitter values\nUsage: ... netem\n", "syntax"),
    ("No distribution data for normal (/usr/lib/tc/normal.dist: No such file or directory)\n", "syntax"),
    ('tbf: illegal value for "burst": "x"\n', "syntax"),
    ('tbf: either "limit" or "latency" is required.\n', "syntax"),
    ('Error: argument "x" is wrong: invalid delay\n', "syntax"),
    ('Cannot find device "nope0"\n', "syntax"),
])
def test_classify_tc_error(stderr, kind):
    assert classify_tc_error(stderr) == kind


def _child(p: NetemPlan, dev: str) -> list[str] | None:
    cmds = [c for c in p.commands if c[4] == dev and "parent" in c and c[c.index("parent") + 1] == "10:1"]
    assert len(cmds) <= 1
    return cmds[0] if cmds else None


def test_duplicate_corrupt_reorder_map_to_netem_options():
    cmd = _netem(_plan({"delay": "10ms", "duplicate": "1%", "corrupt": "0.1%", "reorder_prob": "25%",
                        "reorder_gap": "5"}), CLIENT)
    assert _after(cmd, "duplicate", 1) == ["1%"]
    assert _after(cmd, "corrupt", 1) == ["0.1%"]
    assert _after(cmd, "reorder", 3) == ["25%", "gap", "5"]


def test_loss_ecn_maps_to_netem_ecn_only_with_loss():
    assert "ecn" in _netem(_plan({"loss": "1%", "loss_ecn": "yes"}), CLIENT)
    assert "ecn" not in _netem(_plan({"delay": "1ms", "loss_ecn": "yes"}), CLIENT)


@pytest.mark.parametrize(("slot", "want"), [
    ("5ms", ["slot", "5000us", "5000us"]),
    ("5ms:1ms:packets=4", ["slot", "4000us", "6000us", "packets", "4"]),
    ("5ms:1ms:normal:bytes=6000", ["slot", "distribution", "normal", "5000us", "1000us", "bytes", "6000"]),
])
def test_slot_mapping(slot, want):
    cmd = _netem(_plan({"slot": slot}), CLIENT)
    i = cmd.index("slot")
    assert cmd[i:i + len(want)] == want


def test_overhead_and_mpu_go_to_tbf():
    tbf = _tbf(_plan({"rate": "10mbit", "overhead": "8", "mpu": "64"}), CLIENT)
    assert _opt(tbf, "overhead") == "8" and _opt(tbf, "mpu") == "64"
    assert "overhead" not in _tbf(_plan({"rate": "10mbit"}), CLIENT)


@pytest.mark.parametrize(("qdisc", "want"), [
    ("codel:target=3ms:ecn=yes", ["codel", "limit", "83", "target", "3000us", "interval", "100000us", "ecn"]),
    ("fq_codel", ["fq_codel", "limit", "83", "flows", "1024", "quantum", "1514", "target", "5000us",
                  "interval", "100000us", "ecn"]),
    ("pie:alpha=0.25", ["pie", "limit", "83", "target", "15000us", "tupdate", "15000us", "alpha", "4", "beta", "20",
                        "noecn", "nobytemode"]),
    ("drop_head", ["pfifo_head_drop", "limit", "83"]),
])
def test_queue_disciplines_become_a_tbf_child(qdisc, want):
    # 100 Mbit/s, 10 ms RTT: one BDP = 125000 bytes = 83 packets of 1500 bytes
    p = _plan({"rate": "100mbit", "rtt": "10ms", "qdisc": qdisc})
    child = _child(p, CLIENT)
    assert child is not None and child[child.index("20:") + 1:] == want


def test_drop_tail_and_no_rate_have_no_child():
    assert _child(_plan({"rate": "10mbit"}), CLIENT) is None
    assert _child(_plan({"delay": "10ms", "qdisc": "codel"}), CLIENT) is None


@pytest.mark.parametrize(("common", "field"), [
    ({"loss_after": "1%"}, "downlink.loss_after"),
    ({"delay": "10ms", "jitter": "2ms", "jitter_interval": "20ms"}, "downlink.jitter_interval_s"),
    ({"rate": "10mbit", "qdisc": "pie:burst=100ms"}, "downlink.qdisc.max_burst_s"),
    ({"rate": "10mbit", "overhead": "-4"}, "downlink.overhead_bytes"),
    ({"delay": "10ms", "keep_state": "yes"}, "keep_state"),
])
def test_what_netem_cannot_do_is_named(common, field):
    link = parse_link(common)
    assert field in unsupported_features(link)
    with pytest.raises(NetemUnsupported, match=field.replace(".", r"\.")):
        plan(link, CLIENT, SERVER)


def test_base_path_is_subtracted_from_the_delay():
    p = plan(parse_link({"rtt": "10ms"}), CLIENT, SERVER, (0.0002, 0.0001))
    assert _after(_netem(p, CLIENT), "delay", 1) == ["4800us"]
    assert _after(_netem(p, SERVER), "delay", 1) == ["4900us"]
    assert any("lab's own path" in n for n in p.notes)


def test_queue_default_is_one_bdp_of_the_whole_path():
    # asymmetric delays: both directions' default queue comes from the 50 ms round trip
    link = parse_link({"rate": "100mbit"}, down={"delay": "40ms"}, up={"delay": "10ms"})
    assert link.queue_limit_bytes(link.downlink) == link.queue_limit_bytes(link.uplink) == 625000
    assert int(_opt(_tbf(plan(link, CLIENT, SERVER), SERVER), "limit")) == 625000


def _run_apply_script(tmp_path, commands, fail_on: str = "") -> tuple[int, str, list[str]]:
    """apply_script run by bash with stand-in `tc` and `quiclab-router` that log their arguments (and `tc` failing
    where its arguments contain `fail_on`, as tc does: its error on stderr, exit code 2)."""
    import os
    import subprocess

    log = tmp_path / "log"
    for name in ("tc", "quiclab-router"):
        stub = tmp_path / name
        stub.write_text(f'#!/bin/bash\necho "{name} $*" >> {log}\n'
                        + (f'[[ "$*" == *"{fail_on}"* ]] && {{ echo "Error: bad {fail_on}" >&2; exit 2; }}\n'
                           if fail_on and name == "tc" else "")
                        + ('[ "$2" = del ] && { echo "Error: Cannot delete qdisc with handle of zero." >&2; exit 2; }\n'
                           if name == "tc" else "") + "exit 0\n")
        stub.chmod(0o755)
    script = apply_script(commands, "c0", "s0", kernel_path=True)
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    return done.returncode, done.stderr, log.read_text().splitlines()


def test_the_apply_script_sets_the_path_clears_then_runs_every_command_in_one_go(tmp_path):
    p = _plan({"rate": "5mbit", "delay": "10ms"})
    code, err, ran = _run_apply_script(tmp_path, p.commands)
    assert code == 0 and err == ""  # the clears' "nothing to delete" errors are ignored (and not shown)
    assert ran == ["quiclab-router path kernel", "tc qdisc del dev c0 root", "tc qdisc del dev s0 root",
                   *(" ".join(c) for c in p.commands)]


def test_the_apply_script_stops_at_the_first_failing_command_and_names_it(tmp_path):
    p = _plan({"rate": "5mbit", "delay": "10ms"})
    code, err, ran = _run_apply_script(tmp_path, p.commands, fail_on="tbf")
    tbf = next(i for i, c in enumerate(p.commands) if "tbf" in c)
    assert code == 2
    assert "Error: bad tbf" in err and f"for: {' '.join(p.commands[tbf])}" in err
    assert ran[3:] == [" ".join(c) for c in p.commands[:tbf + 1]]  # nothing after the failure ran
