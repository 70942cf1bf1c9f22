"""The built-in presets and the seed studies they follow (issue 26): every preset loads and plans; every preset of a
seed (by its name's prefix) runs >= 5 repeats, as the seed atlas needs (n >= 5 per point and method), and carries a
TOML comment citing the seed file and its lines (e.g. `# 000 lines 16, 24, 30-48: ...`); the seeds' conditions that
the presets promise (server -> client only delay and loss for the survey, reordering jitter, KTH unshaped, Bolina's
0-RTT arm and NewReno vs CUBIC, Yu's reuse/new arms, Connectify's loss-based senders) are in their plans."""

from __future__ import annotations

import re
import tomllib

import pytest

from lab.plan import presets
from lab.plan.plan import plan, points
from tests.shared_files import get_preset

#: seed file -> the name prefixes of the presets that follow it (../shared/seeds/README.md)
SEEDS = {"000": ("connectify",), "001": ("yu",), "002": ("kth",), "003": ("survey", "jitter"), "004": ("bolina",)}
PREFIXES = tuple(p for ps in SEEDS.values() for p in ps)
#: a comment citing a seed file and its lines: "# 000 lines 16, 24, 30-48", "# 002 line 154"
CITATION = re.compile(r"^#.*\b(00[0-4]) lines? \d+", re.MULTILINE)
#: presets that are not seed experiments and keep fewer repeats on purpose (smoke tests, evidence-heavy or
#: already-published sweeps whose documented numbers were measured at these counts)
FEWER_REPEATS: dict[str, int] = {}  # none: every preset runs >= 5 (issue 24: n <= 4 per side can show no difference)

ALL = presets.names()
SEED_PRESETS = [n for n in ALL if n.startswith(PREFIXES)]


def text(name: str) -> str:
    return (presets.PRESET_DIR / f"{name}.toml").read_text(encoding="utf-8")


def seed_of(name: str) -> str:
    return next(seed for seed, prefixes in SEEDS.items() if name.startswith(prefixes))


def test_there_are_presets_for_every_seed() -> None:
    assert {seed_of(n) for n in SEED_PRESETS} == set(SEEDS)


@pytest.mark.parametrize("name", ALL)
def test_every_preset_loads_and_plans(name: str) -> None:
    s = get_preset(name)
    assert s.name == name
    assert plan(s)


@pytest.mark.parametrize("name", ALL)
def test_every_preset_has_at_least_five_repeats_or_is_a_named_exception(name: str) -> None:
    s = get_preset(name)
    if name in FEWER_REPEATS:
        assert not name.startswith(PREFIXES), f"{name} follows a seed: it needs repeats >= 5"
        assert s.repeats == FEWER_REPEATS[name], f"{name}: repeats changed; update FEWER_REPEATS or make it >= 5"
    else:
        assert s.repeats >= 5, f"{name}: repeats = {s.repeats} (< 5)"


@pytest.mark.parametrize("name", SEED_PRESETS)
def test_every_seed_preset_cites_its_seed_file_and_lines(name: str) -> None:
    cited = set(CITATION.findall(text(name)))
    assert cited, f"{name}.toml has no comment citing a seed file's lines (e.g. '# {seed_of(name)} lines 1-9: ...')"
    assert seed_of(name) in cited, f"{name}.toml cites {sorted(cited)}, not its seed {seed_of(name)}"


@pytest.mark.parametrize("name", SEED_PRESETS)
def test_seed_presets_have_no_unfilled_placeholders_and_valid_toml(name: str) -> None:
    t = text(name)
    assert "@" not in "".join(ln for ln in t.splitlines() if ln.startswith("#"))
    assert tomllib.loads(t)["name"] == name


@pytest.mark.parametrize("name", ["survey-delay", "survey-loss", "survey-grid", "survey-spikes"])
def test_survey_delay_and_loss_go_from_the_server_to_the_client_only(name: str) -> None:
    for p in points(presets.get(name)):
        assert p.link.uplink.delay_s == 0 and p.link.uplink.loss.mean == 0, p.label
    assert any(p.link.downlink.delay_s > 0 for p in points(presets.get(name)))


@pytest.mark.parametrize("name", ["survey-delay", "survey-loss", "survey-spikes"])
def test_survey_presets_move_the_seeds_object(name: str) -> None:
    assert {p.size for p in points(presets.get(name))} == {33_600_000}


def test_jitter_reorder_reorders_and_jitter_keeps_order() -> None:
    reorder = points(presets.get("jitter-reorder"))
    assert all(p.link.downlink.reorder for p in reorder) and any(p.link.downlink.jitter_s > 0 for p in reorder)
    assert not any(p.link.downlink.reorder for p in points(presets.get("jitter")))


def test_kth_unshaped_has_no_rate_and_no_added_delay() -> None:
    pts = points(presets.get("kth-unshaped"))
    assert len(pts) == 4 * 5
    for p in pts:
        for d in (p.link.downlink, p.link.uplink):
            assert d.rate_bps is None and d.delay_s == 0


def test_bolina_runs_tcp_and_quic_at_reno_and_cubic_at_a_tenth_of_a_percent_loss() -> None:
    s = presets.get("bolina")
    pts = points(s)
    assert {p.settings.cc for p in pts} == {"reno", "cubic"}
    assert all(p.link.downlink.loss.mean == pytest.approx(0.001) for p in pts)
    assert {(r.protocol.value, r.client, r.server) for r in plan(s)} >= {("h1", "curl", "nginx"),
                                                                          ("h3", "gtlsclient", "ngtcp2")}


def test_bolina_0rtt_has_a_0rtt_arm_for_a_client_that_sends_it() -> None:
    from lab.endpoints.registry import registry

    s = presets.get("bolina-0rtt")
    assert any(p.settings.workload.kind == "0rtt" for p in points(s))
    assert any("0rtt" in registry().client(c).workloads for c in s.clients)


def test_yu_reuse_compares_reuse_with_new_handshakes() -> None:
    kinds = {p.settings.workload.kind for p in points(presets.get("yu-reuse"))}
    assert kinds == {"reuse", "new"}


def test_yu_has_chromium_and_a_35ms_base_variant() -> None:
    assert "chromium" in presets.get("yu").clients
    assert min(p.link.rtt_s for p in points(presets.get("yu-rtt35"))) == pytest.approx(0.035)


@pytest.mark.parametrize("sweep", ["loss", "rtt", "rate"])
def test_connectify_sweeps_have_loss_based_sender_arms_at_10mb(sweep: str) -> None:
    cubic = presets.get(f"connectify-{sweep}-cubic")
    sid = presets.get(f"connectify-{sweep}-nginx-sid")
    assert cubic.cc == "cubic" and "ngtcp2" in cubic.servers and "nginx-sid" in sid.servers
    for s in (cubic, sid):
        assert {p.size for p in points(s)} == {10_000_000}
        assert [p.label for p in points(s)] == [p.label for p in points(presets.get(f"connectify-{sweep}"))]
