"""Bad input, from every source, through the real CLI: exit 2, exactly one line on stderr naming the bad value,
no traceback.

Each case runs `python -m lab ...` in a subprocess, in a temporary folder (its HOME and working directory) with its
own .env (the repository's is not read) and with the Docker engine made unreachable (DOCKER_HOST points nowhere):
the values must be refused before anything touches the lab, so these pass alike with the lab up or down, and a
check that ran only after a lab access would show up as "Docker engine not reachable", without the bad value.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from lab.results.schema import COLUMNS

NO_DOCKER = "unix:///nonexistent/quiclab-tests-docker.sock"
# `python -m lab`, with lab.config.ENV_FILE pointed at the case's own .env first.
BOOT = ("import runpy, sys; from pathlib import Path; import lab.config as c; c.ENV_FILE = Path(sys.argv.pop(1)); "
        "sys.argv[0] = 'quiclab'; runpy.run_module('lab', run_name='__main__', alter_sys=True)")

RUNS_HEADER = ",".join(COLUMNS) + "\n"
SCENARIO = 'name = "s"\n'


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    needle: str  # the bad value (or option) the one line must name
    env: dict[str, str] = field(default_factory=dict)
    dotenv: str = ""
    files: dict[str, str | bytes] = field(default_factory=dict)  # relative path -> content ("/" suffix: folder)
    more: tuple[str, ...] = ()  # further problems the same line must name (a file with several)


def case(id: str, *args: str, needle: str, env: dict[str, str] | None = None, dotenv: str = "",
         files: dict[str, str | bytes] | None = None) -> Case:
    return Case(id, args, needle, env or {}, dotenv, files or {})


def scen(id: str, body: str, needle: str, extra: dict[str, str | bytes] | None = None, more: tuple[str, ...] = ()
         ) -> Case:
    c = case(f"scenario-{id}", "sweep", "--scenario", "s.toml", needle=needle, files={"s.toml": body, **(extra or {})})
    return replace(c, more=more)


BACKWARDS = "10\n20\n15\n30\n"

CASES = [
    # run
    case("run-protocol", "run", "--protocol", "h4", needle="'h4'"),
    case("run-protocol-empty", "run", "--protocol", ",", needle="--protocol"),
    case("run-size-negative", "run", "--size", "-5", needle="'-5'"),
    case("run-size-unit", "run", "--size", "12XB", needle="'12XB'"),
    case("run-size-zero", "run", "--size", "0", needle="'0'"),
    case("run-size-too-big", "run", "--size", "5GiB", needle="'5GiB'"),
    case("run-client", "run", "--client", "wget", needle="'wget'"),
    case("run-server", "run", "--server", "apache", needle="'apache'"),
    case("run-timeout-zero", "run", "--timeout", "0", needle="--timeout 0"),
    case("run-timeout-big", "run", "--timeout", "3601", needle="--timeout 3601"),
    case("run-timeout-word", "run", "--timeout", "abc", needle="'abc'"),
    case("run-capture", "run", "--capture", "bogus", needle="'bogus'"),
    case("run-cc-fixed", "run", "--cc", "bbr", needle="'bbr'"),
    case("run-cc-unknown", "run", "--client", "gtlsclient", "--protocol", "h3", "--cc", "vegas", needle="'vegas'"),
    case("run-unknown-option", "run", "--bogus", needle="--bogus"),
    case("run-size-markup", "run", "--size", "[/x]", needle="'[/x]'"),  # rich markup in a value: printed as is
    # environment and .env
    case("env-timeout-word", "run", needle="QUICLAB_TIMEOUT 'abc'", env={"QUICLAB_TIMEOUT": "abc"}),
    case("env-timeout-zero", "run", needle="QUICLAB_TIMEOUT '0'", env={"QUICLAB_TIMEOUT": "0"}),
    case("dotenv-timeout-big", "run", needle="QUICLAB_TIMEOUT '5000'", dotenv="QUICLAB_TIMEOUT=5000\n"),
    case("dotenv-prometheus-port", "run", "--size", "1kB", needle="QUICLAB_PROMETHEUS_PORT 'abc'",
         dotenv="QUICLAB_PROMETHEUS_PORT=abc\n"),
    case("env-pushgateway-port", "status", needle="QUICLAB_PUSHGATEWAY_PORT '0'",
         env={"QUICLAB_PUSHGATEWAY_PORT": "0"}),
    case("env-grafana-port", "up", needle="QUICLAB_GRAFANA_PORT '70000'", env={"QUICLAB_GRAFANA_PORT": "70000"}),
    case("env-pushgateway-url-scheme", "sweep", "quick", needle="'ftp://gw:9091'",
         env={"QUICLAB_PUSHGATEWAY_URL": "ftp://gw:9091"}),
    case("dotenv-pushgateway-url-port", "sweep", "quick", needle="'http://127.0.0.1:99999'",
         dotenv="QUICLAB_PUSHGATEWAY_URL=http://127.0.0.1:99999\n"),
    case("env-grafana-switch", "up", needle="QUICLAB_GRAFANA 'maybe'", env={"QUICLAB_GRAFANA": "maybe"}),
    case("dotenv-grafana-tag", "up", needle="QUICLAB_GRAFANA_TAG 'bad tag!'",
         dotenv="QUICLAB_GRAFANA_TAG='bad tag!'\n"),
    case("dotenv-linkem-spin", "shape", "--show", needle="QUICLAB_LINKEM_SPIN_US '-1'",
         dotenv="QUICLAB_LINKEM_SPIN_US=-1\n"),
    case("env-linkem-napi", "up", needle="QUICLAB_LINKEM_NAPI 'fast'", env={"QUICLAB_LINKEM_NAPI": "fast"}),
    case("dotenv-linkem-napi", "sweep", "quick", needle="QUICLAB_LINKEM_NAPI 'threaded'",
         dotenv="QUICLAB_LINKEM_NAPI=threaded\n"),
    case("env-images-tag", "build", needle="QUICLAB_TAG 'a:b'", env={"QUICLAB_TAG": "a:b"}),
    case("env-agent-switch", "run", needle="QUICLAB_AGENT 'fast'", env={"QUICLAB_AGENT": "fast"}),
    case("env-curl-spare-switch", "run", needle="QUICLAB_CURL_SPARE 'maybe'", env={"QUICLAB_CURL_SPARE": "maybe"}),
    case("env-slow-below-one", "sweep", "quick", needle="QUICLAB_SLOW '0.5'", env={"QUICLAB_SLOW": "0.5"}),
    case("dotenv-slow-word", "up", needle="QUICLAB_SLOW 'very'", dotenv="QUICLAB_SLOW=very\n"),
    case("env-instance-big", "down", needle="QUICLAB_INSTANCE '10'", env={"QUICLAB_INSTANCE": "10"}),
    case("dotenv-instance-name", "run", needle="QUICLAB_INSTANCE 'ci-a'", dotenv="QUICLAB_INSTANCE=ci-a\n"),
    case("dotenv-malformed-line", "down", needle="'not an assignment'",
         dotenv="QUICLAB_TIMEOUT=10\nnot an assignment\n"),
    # shape
    case("shape-shaper", "shape", "--shaper", "bogus", needle="'bogus'"),
    case("shape-dist", "shape", "--jitter", "5ms", "--dist", "wobbly", needle="'wobbly'"),
    case("shape-clear-with-loss", "shape", "--clear", "--loss", "1%", needle="--loss"),
    case("shape-show-with-rate", "shape", "--show", "--rate", "5mbit", needle="--rate"),
    case("shape-show-and-clear", "shape", "--show", "--clear", needle="--clear"),
    case("shape-netem-outage", "shape", "--shaper", "netem", "--outage", "10s:200ms", needle="outage"),
    case("shape-netem-spikes", "shape", "--shaper", "netem", "--rate", "5mbit", "--spikes", "5s:200ms:10%",
         needle="spikes"),
    case("shape-netem-trace", "shape", "--shaper", "netem", "--trace", "ok.trace", needle="trace",
         files={"ok.trace": "1\n2\n3\n"}),
    case("shape-trace-backwards", "shape", "--trace", "back.trace", needle="'back.trace'",
         files={"back.trace": BACKWARDS}),
    case("shape-trace-missing", "shape", "--trace", "missing.trace", needle="'missing.trace'"),
    case("shape-trace-words", "shape", "--trace", "words.trace", needle="'soon'", files={"words.trace": "1\nsoon\n"}),
    case("shape-loss", "shape", "--loss", "150%", needle="'150%'"),
    case("shape-rate", "shape", "--rate", "fast", needle="'fast'"),
    case("shape-rtt-and-delay", "shape", "--rtt", "20ms", "--delay", "10ms", needle="rtt"),
    case("shape-ge", "shape", "--ge", "1%", needle="'1%'"),
    case("shape-queue", "shape", "--rate", "5mbit", "--queue", "0p", needle="'0p'"),
    case("shape-down-not-key-value", "shape", "--down", "bogus", needle="'bogus'"),
    case("shape-down-unknown-key", "shape", "--down", "colour=red", needle="'colour'"),
    case("shape-seed", "shape", "--seed", "-3", needle="'-3'"),
    case("shape-outage", "shape", "--outage", "1s:2s", needle="'1s:2s'"),
    case("shape-spikes-without-rate", "shape", "--spikes", "5s:200ms:10%", needle="spikes"),
    # sweep
    case("sweep-nothing", "sweep", needle="preset"),
    case("sweep-unknown-preset", "sweep", "nope", needle="'nope'"),
    case("sweep-repeats-zero", "sweep", "quick", "--repeats", "0", needle="--repeats 0"),
    case("sweep-until-verdict-unknown", "sweep", "quick", "--until-verdict", "h9", needle="--until-verdict 'h9'"),
    case("sweep-until-verdict-ambiguous", "sweep", "quick", "--until-verdict", "curl", needle="'curl'"),
    case("sweep-until-verdict-repeats", "sweep", "quick", "--until-verdict", "h1", "--repeats", "3",
         needle="--repeats"),
    case("sweep-max-repeats-zero", "sweep", "quick", "--until-verdict", "h1", "--max-repeats", "0",
         needle="--max-repeats 0"),
    case("sweep-max-repeats-alone", "sweep", "quick", "--max-repeats", "9", needle="--max-repeats"),
    case("sweep-repeats-negative", "sweep", "quick", "--repeats", "-3", needle="--repeats -3"),
    case("sweep-repeats-word", "sweep", "quick", "--repeats", "five", needle="'five'"),
    case("sweep-seed-negative", "sweep", "quick", "--seed", "-1", needle="--seed -1"),
    case("sweep-seed-huge", "sweep", "quick", "--seed", str(2**63), needle=str(2**63)),
    case("sweep-protocols", "sweep", "quick", "--protocols", "h1,h4", needle="'h4'"),
    case("sweep-sizes", "sweep", "quick", "--sizes", "0", needle="'0'"),
    case("sweep-clients", "sweep", "quick", "--clients", "wget", needle="'wget'"),
    case("sweep-servers", "sweep", "quick", "--servers", "apache", needle="'apache'"),
    case("sweep-shaper", "sweep", "quick", "--shaper", "bogus", needle="'bogus'"),
    case("sweep-capture", "sweep", "quick", "--capture", "pcap,bogus", needle="'bogus'"),
    case("sweep-workload", "sweep", "quick", "--workload", "page:0x1kB", needle="'page:0x1kB'"),
    case("sweep-workload-swept", "sweep", "quick", "--workload", "bulk,pgae:1x1kB", needle="'pgae:1x1kB'"),
    case("sweep-out-is-a-file", "sweep", "quick", "--out", "afile", needle="'afile'", files={"afile": "x"}),
    case("sweep-sender-cc", "sweep", "quick", "--sender-cc", "vegas", needle="'vegas'"),
    case("sweep-sender-cc-swept", "sweep", "quick", "--sender-cc", "reno,vegas", needle="'vegas'"),
    case("run-sender-cc", "run", "--sender-cc", "vegas", needle="'vegas'"),
    case("merge-missing", "merge", "nosuch", needle="'nosuch'"),
    case("merge-not-a-sweep", "merge", "emptydir", needle="'emptydir'", files={"emptydir/": ""}),
    case("merge-a-file", "merge", "afile", needle="'afile'", files={"afile": "x"}),
    scen("scenario-fault", SCENARIO + "faults = 'freeze:1s@1s'\n", "'freeze:1s@1s'"),
    scen("scenario-competing", SCENARIO + "competing = 'tcp-vegas'\n", "'tcp-vegas'"),
    scen("scenario-path", SCENARIO + "path = 'teleport@1s'\n", "'teleport@1s'"),
    case("resume-with-repeats", "sweep", "--resume", "old", "--repeats", "10", needle="--repeats"),
    case("resume-with-shaper", "sweep", "--resume", "old", "--shaper", "linkem", needle="--shaper"),
    case("resume-with-workload", "sweep", "--resume", "old", "--workload", "page:2x1kB", needle="--workload"),
    case("resume-with-sender-cc", "sweep", "--resume", "old", "--sender-cc", "reno", needle="--sender-cc"),
    case("resume-with-preset", "sweep", "quick", "--resume", "old", needle="--resume"),
    case("resume-not-a-sweep", "sweep", "--resume", "old", needle="'old'", files={"old/": ""}),
    case("resume-manifest-not-text", "sweep", "--resume", "old", needle="manifest.json",
         files={"old/manifest.json": b"\xff\xfe{"}),
    case("resume-manifest-bad-scenario", "sweep", "--resume", "old", needle="'lots'",
         files={"old/manifest.json": '{"scenario": {"name": "s", "repeats": "lots"}}'}),
    # scenario files
    case("scenario-missing-file", "sweep", "--scenario", "nope.toml", needle="'nope.toml'"),
    scen("not-toml", "name = \n", "'s.toml'"),
    scen("workload", 'name = "w"\nworkload = "zzz"\n', "'zzz'"),
    scen("not-text", "", "'s.toml'", {"s.toml": b"\xff\xfe\x00name"}),
    scen("unknown-key", SCENARIO + "colour = 'red'\n", "'colour'"),
    scen("no-name", "repeats = 2\n", "'name'"),
    scen("repeats-type", SCENARIO + "repeats = 'five'\n", "'five'"),
    scen("repeats-zero", SCENARIO + "repeats = 0\n", "repeats"),
    scen("timeout-big", SCENARIO + "timeout = 4000\n", "4000"),
    scen("protocols-empty", SCENARIO + "protocols = []\n", "protocols"),
    scen("protocols-type", SCENARIO + "protocols = 'h1'\n", "'h1'"),
    scen("link-rate", SCENARIO + "[link]\nrate = 'fast'\n", "'fast'"),
    scen("link-dist", SCENARIO + "[link]\njitter = '5ms'\ndist = 'wobbly'\n", "'wobbly'"),
    scen("link-key", SCENARIO + "[link]\ncolour = 'red'\n", "'colour'"),
    scen("link-trace-backwards", SCENARIO + "[link]\ntrace = 'back.trace'\n", "'back.trace'",
         {"back.trace": BACKWARDS}),
    scen("sweep-key", SCENARIO + "[sweep]\ncolour = ['red']\n", "'colour'"),
    scen("sweep-empty", SCENARIO + "[sweep]\nloss = []\n", "sweep.loss"),
    scen("sweep-value", SCENARIO + "[sweep]\nloss = ['1%', 'lots']\n", "'lots'"),
    scen("sweep-size", SCENARIO + "[sweep]\nsize = ['1MB', '0']\n", "'0'"),
    scen("netem-outage", SCENARIO + "shaper = 'netem'\n[sweep]\noutage = ['off', '10s:200ms']\n", "outage"),
    scen("quic-cc", SCENARIO + "client_quic_cc = {curl = 'bbr'}\n", "'bbr'"),
    scen("sender-cc", SCENARIO + "cc = 'vegas'\n", "'vegas'"),
    # scenario files: every problem named, in one line (unknown names with the nearest valid one)
    scen("unknown-table-no-name", "[frobnicate]\nx = 1\n", "s.toml: 2 problems: unknown table [frobnicate]",
         more=("missing key 'name'",)),
    scen("top-key-typo", SCENARIO + "repeat = 3\n", "unknown key 'repeat' (did you mean 'repeats'?)"),
    scen("top-table-typo", SCENARIO + "[sweeps]\nloss = ['1%']\n", "unknown table [sweeps] (did you mean [sweep]?)"),
    scen("link-key-typo", SCENARIO + "[link]\nlos = '1%'\n", "unknown key 'los' in [link] (did you mean 'loss'?)"),
    scen("link-table-typo", SCENARIO + "[link.dwon]\nrate = '5mbit'\n",
         "unknown table [link.dwon] (did you mean [link.down]?)"),
    scen("link-down-key-typo", SCENARIO + "[link.down]\nrat = '5mbit'\n",
         "unknown key 'rat' in [link.down] (did you mean 'rate'?)"),
    scen("link-up-nested-table", SCENARIO + "[link.up.extra]\nrate = '5mbit'\n", "[link.up.extra]"),
    scen("sweep-key-typo", SCENARIO + "[sweep]\nworkloads = ['bulk']\n",
         "unknown key 'workloads' in [sweep] (did you mean 'workload'?)"),
    scen("quic-cc-client-typo", SCENARIO + "client_quic_cc = {curll = 'bbr'}\n", "(did you mean 'curl'?)"),
    scen("seed-type", SCENARIO + "seed = 'abc'\n", "'abc'"),
    scen("log-y-type", SCENARIO + "log_y = 'maybe'\n", "'maybe'"),
    scen("name-type", "name = 5\n", "'name'"),
    scen("sweep-not-a-list", SCENARIO + "[sweep]\nloss = '1%'\n", "'sweep.loss'"),
    scen("link-down-not-a-table", SCENARIO + "[link]\ndown = '5mbit'\n", "link.down"),
    scen("link-array-of-tables", SCENARIO + "[[link]]\nrate = '5mbit'\n", "'link'"),
    scen("rtt-unit", SCENARIO + "[link]\nrtt = '20 parsecs'\n", "'20 parsecs'"),
    scen("size-unit", SCENARIO + "sizes = ['10MBs']\n", "'10MBs'"),
    scen("sweep-delay-unit", SCENARIO + "[sweep]\ndelay = ['10ms', '5 fortnights']\n", "'5 fortnights'"),
    scen("clients-empty", SCENARIO + "clients = []\n", "clients"),
    scen("sizes-empty", SCENARIO + "sizes = []\n", "sizes"),
    scen("duplicate-protocol", SCENARIO + "protocols = ['h1', 'http/1.1']\n",
         "duplicate 'http/1.1' in protocols (the same as 'h1')"),
    scen("duplicate-size", SCENARIO + "sizes = ['1MB', '1000kB']\n", "duplicate '1000kB' in sizes"),
    scen("duplicate-sweep-value", SCENARIO + "[sweep]\nloss = ['1%', '1%']\n", "duplicate '1%' in sweep.loss"),
    scen("duplicate-key", SCENARIO + "repeats = 2\nrepeats = 3\n", "line 3"),
    scen("duplicate-table", SCENARIO + "[link]\nrate = '5mbit'\n[link]\nloss = '1%'\n", "('link',)"),
    scen("unterminated-string", 'name = "s\n', "line 1"),
    scen("bad-table-header", SCENARIO + "[link\nrate = '5mbit'\n", "line 2"),
    scen("mixed-values", 'name = "bad name!"\nrepeats = 0\n[link]\nrate = "fast"\nloss = "lots"\n',
         "4 problems", more=("'bad name!'", "'repeats' (got 0)", "'fast'", "'lots'")),
    scen("mixed-names-and-values", SCENARIO + "colour = 'red'\nprotocols = ['h4']\n[link]\nloss = '150%'\n"
         "[sweep]\nrtt = ['10ms', 'soon']\n", "4 problems", more=("'colour'", "'h4'", "'150%'", "'soon'")),
    scen("both-quic-cc-names", SCENARIO + "quic_cc = {}\nclient_quic_cc = {}\n", "give client_quic_cc only"),
    case("scenario-path-markup", "sweep", "--scenario", "[red]s[/].toml", needle="'[red]s[/].toml'"),
    case("scenario-is-a-folder", "sweep", "--scenario", "sdir", needle="'sdir'", files={"sdir/": ""}),
    # report / compare
    case("report-missing", "report", "gone", needle="'gone'"),
    case("report-file", "report", "afile", needle="'afile'", files={"afile": "x"}),
    case("report-path-markup", "report", "a[bold]b[/x]", needle="'a[bold]b[/x]'"),
    case("report-not-a-sweep", "report", "empty", needle="runs.csv", files={"empty/": ""}),
    case("report-bad-header", "report", "r", needle="runs.csv", files={"r/runs.csv": "garbage,here\n"}),
    case("report-bad-row", "report", "r", needle="'not-a-number'",
         files={"r/runs.csv": RUNS_HEADER + ",".join("not-a-number" for _ in COLUMNS) + "\n"}),
    case("report-bad-manifest", "report", "r", needle="manifest.json",
         files={"r/runs.csv": RUNS_HEADER, "r/manifest.json": "{not json"}),
    case("compare-a-missing", "compare", "gone", "b", needle="'gone'", files={"b/runs.csv": RUNS_HEADER}),
    case("compare-b-missing", "compare", "a", "gone", needle="'gone'", files={"a/runs.csv": RUNS_HEADER}),
    case("compare-one-folder", "compare", "a", needle="'b'", files={"a/runs.csv": RUNS_HEADER}),
    # bench
    case("bench-rounds", "bench", "link", "--rounds", "0", needle="--rounds 0"),
    case("bench-seconds", "bench", "link", "--seconds", "0.5", needle="--seconds 0.5"),
    case("bench-what", "bench", "disk", needle="'disk'"),
    # matrix (issue 33): an unknown stack is named with the registry's allowed names
    replace(case("matrix-unknown-server", "matrix", "--servers", "nginx,lsquic", needle="'lsquic'"),
            more=("--servers", "allowed are", "nginx", "quic-go")),
    replace(case("matrix-unknown-client", "matrix", "--clients", "curl,msquic", needle="'msquic'"),
            more=("--clients", "allowed are", "gtlsclient")),
    replace(case("matrix-server-as-client", "matrix", "--clients", "nginx", needle="'nginx'"),
            more=("unknown client",)),
    case("matrix-empty-servers", "matrix", "--servers", ",", needle="--servers"),
    case("matrix-link", "matrix", "--link", "moon", needle="'moon'"),
    case("matrix-repeats", "matrix", "--repeats", "0", needle="--repeats 0"),
    case("matrix-repeats-too-many", "matrix", "--repeats", "1001", needle="--repeats 1001: allowed is 1..1000"),
    case("matrix-seed-negative", "matrix", "--seed", "-1", needle="--seed -1: allowed is 0.."),
    case("matrix-resume-with-servers", "matrix", "--resume", "old", "--servers", "nginx", needle="--servers"),
    case("matrix-resume-not-a-matrix", "matrix", "--resume", "old", needle="not a matrix",
         files={"old/manifest.json": '{"scenario": {"name": "s"}}'}),
    scen("matrix-link", SCENARIO + "matrix = 'moon'\n", "'moon'"),
    scen("tcp-pairs", SCENARIO + "tcp_pairs = ['curl>caddy']\n", "'curl>caddy'"),
    case("bench-calibrate-parallel", "bench", "calibrate", "--hidden-lab", "1", "--parallel", "many",
         needle="--parallel 'many'"),
    case("bench-calibrate-resume", "bench", "calibrate", "--hidden-lab", "1", "--resume", "nothere",
         needle="--resume nothere"),
    case("bench-calibrate-resume-not-a-benchmark", "bench", "calibrate", "--hidden-lab", "1", "--resume", "f",
         needle="--resume f", files={"f/": ""}),
]


def _run(c: Case, root: Path) -> subprocess.CompletedProcess[str]:
    where = root / c.id
    (where / "home").mkdir(parents=True)
    for rel, content in c.files.items():
        target = where / rel
        if rel.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    (where / ".env").write_text(c.dotenv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUICLAB_")}
    env.update(HOME=str(where / "home"), DOCKER_HOST=NO_DOCKER, COLUMNS="200", **c.env)
    return subprocess.run([sys.executable, "-c", BOOT, str(where / ".env"), *c.args], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every case, run a few at a time (each is a fresh interpreter: start-up dominates)."""
    root = tmp_path_factory.mktemp("bad-inputs")
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip((c.id for c in CASES), pool.map(lambda c: _run(c, root), CASES), strict=True))


def test_the_table_is_large_and_unique():
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    assert len({(c.args, tuple(c.env.items()), c.dotenv, tuple(c.files.items())) for c in CASES}) == len(CASES)


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input_exits_2_with_one_line_naming_it(c: Case, outcomes):
    r = outcomes[c.id]
    shown = f"quiclab {' '.join(c.args)} -> exit {r.returncode}\nstderr:\n{r.stderr}\nstdout:\n{r.stdout}"
    assert "Traceback" not in r.stderr, shown
    assert r.returncode == 2, shown
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, shown
    assert lines[0].startswith("error: "), shown
    assert all(n in lines[0] for n in (c.needle, *c.more)), shown
    assert "Docker engine not reachable" not in lines[0], shown  # refused only after trying the lab
