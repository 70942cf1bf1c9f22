"""Workload strings and the page/reuse/resume arithmetic (pure logic: no lab)."""

from __future__ import annotations

import pytest

from lab.errors import UsageError
from lab.evidence import sessions
from lab.protocols import Protocol
from lab.workloads import curl as workload_curl
from lab.workloads.result import ObjectReport, timings, verify_objects
from lab.workloads.spec import FORMS, Workload, parse_workload


@pytest.mark.parametrize(("text", "expected", "label"), [
    ("bulk", Workload("bulk", 1, None), "bulk"),
    ("bulk:1MB", Workload("bulk", 1, 1_000_000), "bulk:1MB"),
    ("page:50x20kB", Workload("page", 50, 20_000), "page:50x20kB"),
    (" PAGE:50X20kB ", Workload("page", 50, 20_000), "page:50x20kB"),
    ("reuse:10x100kB", Workload("reuse", 10, 100_000), "reuse:10x100kB"),
    ("new:10x100kB", Workload("new", 10, 100_000), "new:10x100kB"),
    ("resume:100kB", Workload("resume", 1, 100_000), "resume:100kB"),
    ("0rtt:100kB", Workload("0rtt", 1, 100_000), "0rtt:100kB"),
    ("page:3x1500", Workload("page", 3, 1500), "page:3x1500B"),
    ("page:2x1MiB", Workload("page", 2, 1_048_576), "page:2x1048576B"),
])
def test_valid_workloads_parse_and_round_trip(text, expected, label):
    w = parse_workload(text)
    assert w == expected
    assert w.label() == label
    assert parse_workload(w.label()) == w


@pytest.mark.parametrize("text", ["", "bulky", "page", "page:", "page:50", "page:x20kB", "page:0x20kB",
                                  "page:501x1kB", "page:50x", "page:50x20XB", "page:50x0", "resume", "resume:3x1kB",
                                  "0rtt:abc", "bulk:", "reuse:-1x1kB", "page:1000x4GB"])
def test_bad_workloads_are_one_line_naming_value_and_forms(text):
    with pytest.raises(UsageError) as e:
        parse_workload(text)
    msg = str(e.value)
    assert "\n" not in msg
    assert repr(text) in msg
    assert FORMS in msg


def test_total_bytes_and_point_size():
    assert parse_workload("bulk").total_bytes(1_000_000) == 1_000_000
    assert parse_workload("page:50x20kB").total_bytes(1_000_000) == 1_000_000
    assert parse_workload("page:50x20kB").multi and not parse_workload("0rtt:1kB").multi
    assert parse_workload("0rtt:1kB").sessions


SHA = {str(i): f"{i:064x}" for i in range(3)}


def obj(name: str, total: float, done: float, *, version: str = "2", size: int = 100, new: bool = False,
        sha: str | None = None) -> ObjectReport:
    return ObjectReport(name=name, http_version=version, bytes=size, sha256=SHA[name] if sha is None else sha,
                        total_s=total, done_at=done, new_connection=new)


def test_parallel_page_time_is_first_start_to_last_byte():
    # starts at 10.0, 10.1, 10.0; ends 10.5, 10.4, 10.9
    reports = [obj("0", 0.5, 10.5, new=True), obj("1", 0.3, 10.4), obj("2", 0.9, 10.9)]
    page, spans = timings(reports, parallel=True)
    assert page == pytest.approx(0.9)
    assert spans[1] == pytest.approx((0.1, 0.4))
    r = verify_objects(reports, SHA, Protocol.H2, 100, parallel=True, exit_code=0)
    assert r.ok, r.failure
    assert r.page_time_s == pytest.approx(0.9)
    assert [o.done_s for o in r.objects] == pytest.approx([0.5, 0.4, 0.9])
    assert r.connections == 1 and r.handshakes == 1
    assert r.bytes == 300


def test_page_origin_from_the_navigation_counts_when_earlier():
    reports = [obj(n, t, d, version="3") for n, t, d in (("0", .5, 10.5), ("1", .3, 10.4), ("2", .9, 10.9))]
    r = verify_objects(reports, SHA, Protocol.H3, 100, parallel=True, exit_code=0, origin=9.8, extra_connections=1)
    assert r.ok, r.failure
    assert r.page_time_s == pytest.approx(1.1)
    assert r.connections == 1


def test_sequential_time_is_the_sum_of_request_times():
    reports = [obj("0", 0.2, 5.0, new=True), obj("1", 0.1, 99.0), obj("2", 0.3, 1.0)]
    r = verify_objects(reports, SHA, Protocol.H2, 100, parallel=False, exit_code=0)
    assert r.ok
    assert r.page_time_s == pytest.approx(0.6)
    assert [o.done_s for o in r.objects] == pytest.approx([0.2, 0.3, 0.6])
    assert r.connections == 1


@pytest.mark.parametrize(("reports", "needle"), [
    ([obj("0", .1, 1), obj("1", .1, 1)], "1 of 3 objects were not received (first: 2)"),
    ([obj("0", .1, 1), obj("1", .1, 1, version="1.1"), obj("2", .1, 1)], "asked for HTTP/2 but HTTP/1.1"),
    ([obj("0", .1, 1), obj("1", .1, 1, size=99), obj("2", .1, 1)], "received 99 bytes"),
    ([obj("0", .1, 1), obj("1", .1, 1), obj("2", .1, 1, sha="0" * 64)], "object 2: SHA-256 mismatch"),
])
def test_any_bad_object_fails_the_run(reports, needle):
    r = verify_objects(reports, SHA, Protocol.H2, 100, parallel=True, exit_code=0)
    assert not r.ok
    assert needle in r.failure


def test_client_exit_code_fails_the_run_first():
    r = verify_objects([], SHA, Protocol.H2, 100, parallel=True, exit_code=28, error="Operation timed out")
    assert not r.ok and r.failure == "client exit code 28: Operation timed out"


def test_wrapper_json_is_parsed_per_transfer():
    line = ('{"exit":0,"mode":"parallel","transfers":[{"t":100.5,"w":{"file":"/tmp/x/0","http_version":"2",'
            '"response_code":200,"size_download":100,"time_connect":0.01,"time_appconnect":0.02,'
            '"time_starttransfer":0.03,"time_total":0.5,"num_connects":1,"conn_id":0,"exitcode":0}},'
            '{"t":100.7,"w":{"file":"/tmp/x/1","http_version":"2","response_code":404,"size_download":100,'
            '"time_total":0.7,"num_connects":0,"conn_id":0,"exitcode":0}}],"sha256":{"0":"aa","1":"bb"},'
            '"errors":"","udp_rcvbuf_errors":3}')
    p = workload_curl.parse("noise\n" + line + "\n")
    assert p.report.exit_code == 0 and p.report.udp_rcvbuf_drops == 3
    a, b = p.objects
    assert (a.name, a.sha256, a.total_s, a.done_at, a.new_connection, a.handshake_s) == ("0", "aa", .5, 100.5, True,
                                                                                        .02)
    assert b.error == "HTTP status 404" and not b.new_connection
    assert workload_curl.parse("garbage").report.exit_code == -1


CLIENT = "10.71.1.10"
SERVER = "10.71.2.11"


def rows(second_cert: bool = False, second_psk: bool = True, zero_rtt: bool = True, accepted: bool = True):
    ee_exts = "57,16,42,28" if accepted else "57,16,28"
    return [
        [CLIENT, "0", "", "0", "1", "57,16,43", ""],
        [SERVER, "0", "", "0,2", "2,8,11,15,20", "51,43,57,16", ""],
        [SERVER, "0", "", "", "4", "42", "11,7,0"],  # NewSessionTicket's early_data: not the EE's
        [CLIENT, "1", "", "0,1" if zero_rtt else "0", "1", "41,42", "2,10,6,0" if zero_rtt else ""],
        [SERVER, "1", "", "0,2", "2,8" + (",11" if second_cert else "") + ",20",
         ("51,43,41," if second_psk else "51,43,") + ee_exts, ""],
    ]


def test_sessions_resumed_with_accepted_early_data():
    v = sessions.analyze(rows(), CLIENT, early=True)
    assert v.failure == "" and v.resumed and v.early_data and v.handshakes == 2


@pytest.mark.parametrize(("kw", "early", "needle"), [
    ({"accepted": False}, True, "0-RTT refused by the server"),
    ({"zero_rtt": False}, True, "sent no 0-RTT packets"),
    ({"second_cert": True}, False, "second handshake carries a Certificate"),
    ({"second_psk": False}, False, "no pre_shared_key"),
])
def test_sessions_failures_name_the_reason(kw, early, needle):
    v = sessions.analyze(rows(**kw), CLIENT, early=early)
    assert needle in v.failure


def test_sessions_resume_without_early_data_passes_when_not_asked():
    v = sessions.analyze(rows(accepted=False, zero_rtt=False), CLIENT, early=False)
    assert v.failure == "" and v.resumed and not v.early_data


def test_sessions_need_two_handshakes():
    v = sessions.analyze(rows()[:3], CLIENT, early=False)
    assert "1 handshakes, expected 2" in v.failure


def test_workload_is_a_scenario_dimension_default_or_swept():
    from lab.plan.checks import validate
    from lab.plan.plan import plan, points, timeout_for

    s = validate({"name": "w", "protocols": ["h2"], "repeats": 1, "link": {"rate": "20mbit", "rtt": "40ms"},
                  "sweep": {"workload": ["page:50x20kB", "bulk"], "loss": ["0%", "1%"]}}, "test")
    pts = points(s)
    assert [p.settings.workload.label() for p in pts] == ["page:50x20kB", "page:50x20kB", "bulk", "bulk"]
    assert pts[0].label == "workload=page:50x20kB loss=0%"
    assert len(plan(s)) == 4
    d = validate({"name": "d", "workload": "0rtt:100kB"}, "test")
    assert all(p.settings.workload.label() == "0rtt:100kB" for p in points(d))
    big = validate({"name": "t", "timeout": 0, "link": {"rate": "1mbit"}, "sweep": {"workload": ["page:100x100kB"]}},
                   "test")
    assert timeout_for(big, points(big)[0]) > 4 * 10e6 * 8 / 1e6  # sized from all the page's bytes
    with pytest.raises(UsageError, match=r"sweep\.workload: invalid workload 'page:0x1kB'"):
        validate({"name": "x", "sweep": {"workload": ["page:0x1kB"]}}, "test")


def test_a_timed_out_transfer_is_read_not_mistaken_for_broken_output():
    line = ('{"exit":28,"mode":"parallel","transfers":[{"t":5.5,"w":{"file":"/t/3","http_version":"0",'
            '"response_code":000,"size_download":0,"time_total":60.001,"num_connects":0,"exitcode":28}}],'
            '"sha256":{},"errors":"curl: (28) Operation timed out","udp_rcvbuf_errors":0}')
    p = workload_curl.parse(line)
    assert p.report.exit_code == 28 and p.report.error.startswith("curl: (28)")
    assert p.objects[0].error == "curl exit code 28" and p.objects[0].total_s == pytest.approx(60.001)
    assert workload_curl.parse(line.replace("000", '"000"')).report.exit_code == 28
