"""linkem's JSON is described once: linkem/schema/link.json, the JSON Schema linkem's config types emit (linkem's
own test, src/config_schema.rs, fails when the committed file is not what they emit). Here, the Python side: every
link document lab/link builds for linkem (each preset's points, their link faults, the stages a spec can set, with a
calibrated path delay) keeps that schema, lab/link spells exactly the fields it names with its defaults, and a
document with a wrong field is caught."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, validators

from lab.adverse.faults import faulty_link
from lab.link import linkem
from lab.link.model import Direction, Link
from lab.link.spec import parse_link
from lab.plan import presets
from lab.plan.plan import points
from tests.shared_files import get_preset

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "linkem" / "schema" / "link.json").read_text(encoding="utf-8"))
#: serde_json takes only a number written without a fraction or exponent for an integer field (5.0 is refused),
#: where JSON Schema's "integer" also takes 5.0: here, as in linkem, an integer is a Python int (json.dumps writes 5.0
#: for a float).
STRICT = validators.extend(Draft202012Validator, type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool)))
VALIDATOR = STRICT(SCHEMA)
PATH_DELAY = (0.0002, 0.0003)  # a calibrated lab path (s), as shaper.apply passes it

#: Specs that between them set every stage a link spec can (presets leave some out).
EVERY_STAGE = [
    {"rate": "20mbit", "rtt": "40ms", "qdisc": "pie:ecn=yes", "slot": "2ms:packets=3", "duplicate": "1%",
     "corrupt": "1%", "reorder_prob": "10%", "loss_after": "2%", "overhead": "14", "mpu": "64", "jitter": "3ms",
     "jitter_interval": "15ms", "keep_state": "yes"},
    {"delay": "10ms", "jitter": "2ms", "dist": "paretonormal", "reorder": "yes", "reorder_gap": "5", "ge": "1%,30%",
     "ge_after": "1%,30%", "loss_ecn": "yes", "qdisc": "codel:target=3ms:interval=50ms:ecn=yes",
     "slot": "5ms:1ms:normal:packets=4:bytes=12kB", "outage": "10s:100ms", "queue": "1.5bdp", "rate": "5mbit"},
    {"rate": "10mbit", "spikes": "5s:200ms:10%", "qdisc": "fq_codel:flows=64:quantum=300:ecn=no", "loss": "1%"},
    {"rate": "10mbit", "queue": "100p", "qdisc": "drop_head"},
]


def problems(doc: dict[str, Any]) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path)) or 'config'}: {e.message[:160]}"
            for e in VALIDATOR.iter_errors(doc)]


def preset_links() -> list[tuple[str, Link]]:
    out: list[tuple[str, Link]] = []
    for name in presets.names():
        for p in points(get_preset(name)):
            out.append((f"{name} {p.label}", p.link))
            for fault in p.settings.faults:
                if fault.family == "link":
                    out.append((f"{name} {p.label} {fault.text}", faulty_link(fault, p.link)))
    return out


def test_the_schema_is_a_valid_json_schema():
    Draft202012Validator.check_schema(SCHEMA)


def test_every_presets_links_keep_linkems_contract():
    links = preset_links()
    assert len({name.split()[0] for name, _ in links}) == len(presets.names())
    assert any(" blackout" in name or " rate=" in name for name, _ in links), "no preset's link fault was checked"
    broken = {name: bad for name, link in links for delays in ((0.0, 0.0), PATH_DELAY)
              if (bad := problems(linkem.to_json(link, delays)))}
    assert broken == {}


@pytest.mark.parametrize("spec", EVERY_STAGE)
def test_every_stage_keeps_linkems_contract(spec):
    assert problems(linkem.to_json(parse_link(spec), PATH_DELAY)) == []


def test_a_trace_link_keeps_linkems_contract():
    link = parse_link({"rate": "10mbit"})
    link = link.model_copy(update={"downlink": link.downlink.model_copy(update={"rate_bps": None,
                                                                                "trace_ms": [1, 1, 3, 7]})})
    assert problems(linkem.to_json(link)) == []


def test_lab_link_spells_the_fields_the_schema_names_with_its_defaults():
    fields = SCHEMA["$defs"]["DirectionConfig"]["properties"]
    assert set(linkem.direction_json(Direction(), None)) == set(fields)
    # The fields left out at their defaults (for an older linkem) are left out only at linkem's own defaults.
    assert {k: fields[k]["default"] for k in linkem._NEWER_FIELDS} == linkem._NEWER_FIELDS
    assert set(SCHEMA["properties"]) == {"seed", "keep_state", "downlink", "uplink"}


def test_linkems_answer_at_its_defaults_reads_back_as_the_default_link():
    """What linkem's GET /config answers with nothing set (every field at the schema's default) is lab/link's
    default link."""
    answer = {k: v["default"] for k, v in SCHEMA["properties"].items()}
    assert problems(answer) == []
    assert linkem.from_json(answer) == Link(downlink=Direction(), uplink=Direction())


@pytest.mark.parametrize(("direction", "where", "needle"), [
    ({"delay_ms": 5}, "downlink", "'delay_ms' was unexpected"),
    ({"loss": {"model": "bernoulli", "q": 0.1}}, "downlink.loss", "not valid under any"),
    ({"loss": {"model": "weird"}}, "downlink.loss", "not valid under any"),
    ({"jitter_dist": "cauchy"}, "downlink.jitter_dist", "is not one of ['uniform', 'normal', 'pareto', "),
    ({"rate_bps": 1.5e6}, "downlink.rate_bps", "is not of type 'integer', 'null'"),
    ({"delay_us": 5000.0}, "downlink.delay_us", "is not of type 'integer'"),
    ({"delay_us": -5}, "downlink.delay_us", "less than the minimum"),
    ({"qdisc": {"kind": "codel", "target": 5}}, "downlink.qdisc", "not valid under any"),
    ({"rate_schedule": {"period_ms": 1000, "steps": [[0, 5, 6]]}}, "downlink.rate_schedule", "not valid under any"),
    ({"slot": {"delay_us": 800, "size": 4}}, "downlink.slot", "not valid under any"),
])
def test_a_wrong_field_is_caught(direction, where, needle):
    doc = linkem.to_json(parse_link({"rate": "10mbit", "rtt": "20ms"}))
    assert problems(doc) == []
    doc["downlink"].update(direction)
    found = problems(doc)
    assert len(found) == 1 and found[0].startswith(where + ":") and needle in found[0], found


def test_a_wrong_top_level_field_is_caught():
    doc = linkem.to_json(parse_link({"rate": "10mbit"}))
    assert problems({**doc, "keepstate": True}) == ["config: Additional properties are not allowed ('keepstate' "
                                                    "was unexpected)"]
    assert problems({**doc, "seed": "1"})[0].startswith("seed: '1' is not of type 'integer'")
