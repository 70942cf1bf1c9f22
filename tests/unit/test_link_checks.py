"""Link values refused before the lab is touched: jitter distributions, mahimahi traces, a forced netem that cannot
emulate the link, and the shared ValidationError formatter."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lab.errors import UsageError, validation_line
from lab.link import router, shaper
from lab.link.model import Link
from lab.link.spec import parse_link, read_trace


def test_an_unknown_dist_names_the_value_and_the_choices():
    with pytest.raises(UsageError, match=r"invalid downlink dist 'wobbly': allowed are uniform, normal, pareto, "
                                         r"paretonormal"):
        parse_link({"jitter": "5ms", "dist": "wobbly"})
    assert parse_link({"jitter": "5ms", "dist": "pareto"}).uplink.jitter_dist == "pareto"


@pytest.mark.parametrize(("text", "needle"), [
    ("10\n20\n15\n", r"entry 3 \(15 after 20\)"),
    ("-1\n5\n", r"entry 1 \(-1\)"),
    ("1\nsoon\n", r"entry 2 'soon'"),
    ("", "the last one above 0"),
    ("0\n0\n", "the last one above 0"),
])
def test_a_bad_trace_names_the_file_and_the_entry(tmp_path, text, needle):
    path = tmp_path / "x[1].trace"
    path.write_text(text)
    with pytest.raises(UsageError, match=needle) as e:
        read_trace(path)
    assert repr(str(path)) in str(e.value)


def test_a_good_trace_reads_and_an_unreadable_one_is_named(tmp_path):
    path = tmp_path / "ok.trace"
    path.write_text("0\n1\n1\n7\n")
    assert read_trace(path) == [0, 1, 1, 7]
    with pytest.raises(UsageError, match=r"cannot read trace file .*Is a directory"):
        read_trace(tmp_path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(UsageError, match="not a text file"):
        read_trace(path)


@pytest.mark.parametrize(("spec", "needle"), [
    ({"outage": "10s:200ms"}, "downlink outage, uplink outage"),
    ({"rate": "5mbit", "spikes": "5s:200ms:10%"}, "downlink spikes"),
])
def test_forcing_netem_for_what_it_cannot_do_is_refused_even_with_netem(monkeypatch, spec, needle):
    monkeypatch.setattr(router, "has_netem", lambda: True)  # a kernel with sch_netem: still refused up front
    link = parse_link(spec)
    with pytest.raises(UsageError, match=f"shaper netem cannot emulate {needle}"):
        shaper.choose("netem", link)
    assert shaper.choose("linkem", link).backend == "linkem"
    assert shaper.choose("auto", link).backend == "linkem"


def test_forcing_netem_for_a_trace_is_refused(tmp_path):
    trace = tmp_path / "t"
    trace.write_text("1\n2\n")
    with pytest.raises(UsageError, match="cannot emulate downlink trace"):
        shaper.check("netem", parse_link({"trace": str(trace)}))


def test_netem_is_fine_for_what_it_can_do(monkeypatch):
    monkeypatch.setattr(router, "has_netem", lambda: True)
    link = parse_link({"rate": "5mbit", "rtt": "40ms", "loss": "1%", "jitter": "2ms"})
    shaper.check("netem", link)
    assert shaper.choose("netem", link).backend == "netem"
    with pytest.raises(UsageError, match="unknown shaper 'tc': allowed are auto, netem, linkem"):
        shaper.check("tc", link)


def test_the_shared_validation_formatter():
    with pytest.raises(ValidationError) as e:
        Link.model_validate({"seed": -1})
    assert validation_line(e.value, "link parameter") == \
        "invalid link parameter 'seed' (got -1): Input should be greater than or equal to 0"
    with pytest.raises(ValidationError) as e:
        Link.model_validate({"downlink": {"jitter_dist": "wobbly"}})
    assert validation_line(e.value, "link parameter") == \
        "unknown jitter_dist 'wobbly': allowed are uniform, normal, pareto, paretonormal"
    with pytest.raises(ValidationError) as e:
        Link.model_validate({"colour": 1})
    assert validation_line(e.value, "key", Link.model_fields) == \
        "unknown key 'colour': allowed are downlink, uplink, seed, keep_state"
    with pytest.raises(ValidationError) as e:
        Link.model_validate({"downlink": {"trace_ms": list(range(100, 0, -1))}})
    assert validation_line(e.value, "link parameter") == ("invalid link parameter 'downlink': a mahimahi trace must "
                                                          "be non-decreasing millisecond timestamps ending above 0")
    with pytest.raises(ValidationError) as e:
        Link.model_validate({"downlink": {"trace_ms": [1, "x"]}})
    assert validation_line(e.value, "link parameter").startswith("invalid link parameter 'downlink.trace_ms' "
                                                                 "(got 'x'): ")


def test_what_the_router_tells_once_is_cached_and_can_be_forgotten():
    # asked once per lab (a docker exec each), forgotten when the lab is taken down (tests/lab/test_zz_down.py);
    # a helper inserted above a decorated function once took its @cache away and the down test failed in CI
    for found in (router.interfaces, router.has_netem, router.image):
        assert callable(getattr(found, "cache_clear", None)), found.__name__
