"""The registry (lab/endpoints/implementations.toml) is the lab's only list of implementations: adding one is an
image, a compose stanza and a registry entry. Everything else that needs the implementations derives them from the
registry; a fake extra entry shows up wherever they are listed, and no module under lab/ lists names by hand
except the few justified below."""

from __future__ import annotations

import ast
import copy
import importlib
import re
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lab import config, lab
from lab.adverse.spec import parse_path
from lab.cli import app
from lab.endpoints.registry import REGISTRY_FILE, Registry, help_text, load, parse, registry
from lab.errors import UsageError
from lab.plan import checks as check
from lab.protocols import Protocol
from lab.run import environment

registry_module = importlib.import_module("lab.endpoints.registry")  # (lab.endpoints.registry is also a function)
LAB = Path(lab.__file__).resolve().parent
DATA = tomllib.loads(REGISTRY_FILE.read_text())

FAKE_SERVER = {"role": "server", "description": "a server added by a test", "protocols": ["h1", "h2", "h3"],
               "container": "quiclab-server-fake", "service": "server-fake", "address": "10.71.2.99",
               "host": "fake.quiclab", "port": 443, "version": "fake-server --version",
               "quic_cc": {"fixed": "fakecc (fixed)"}}
FAKE_CLIENT = {"role": "client", "aliases": ["fake-1.0"], "protocols": ["h3"], "container": "quiclab-client-fake",
               "adapter": "lab.endpoints.curl:CurlClient", "version": "fake-client -V",
               "quic_cc": {"options": ["cubic", "bbr"], "default": "cubic"}, "migrates": True}


def fake_registry(**changes: dict) -> Registry:
    """The real registry plus a fake server and a fake client (changes: entries replaced or altered), moved to the
    lab this process drives as registry() is."""
    data = copy.deepcopy(DATA)
    data.update({"fakeserver": dict(FAKE_SERVER), "fakeclient": dict(FAKE_CLIENT)})
    for name, change in changes.items():
        data[name] = {**data[name], **change}
    return parse(data, "fake.toml").for_instance(config.INSTANCE)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Registry:
    reg = fake_registry()
    for module in (registry_module, environment, check):
        monkeypatch.setattr(module, "registry", lambda: reg)
    return reg


def test_the_labs_container_lists_derive_from_the_registry():
    impl_containers = tuple(dict.fromkeys(
        [i.container for i in registry().implementations.values() if i.role == "server"]
        + [i.container for i in registry().implementations.values() if i.role == "client"]))
    assert lab.implementation_containers() == impl_containers
    lab_containers = (config.HOSTNET_CONTAINER, config.ROUTER_CONTAINER, *impl_containers,
                      config.PROMETHEUS_CONTAINER, config.PUSHGATEWAY_CONTAINER)
    one_shots = ("pki", *(f"{config.INSTANCE.service(c)}-route" for c in impl_containers))
    required = (config.ROUTER_CONTAINER, *impl_containers)
    derived = {"LAB_CONTAINERS": lab_containers, "REQUIRED_FOR_RUNS": required, "ONE_SHOTS": one_shots}
    for name, want in derived.items():
        assert getattr(lab, name) == want, name


def test_a_new_registry_entry_is_in_the_labs_lists():
    reg = fake_registry()
    fake_server, fake_client = config.INSTANCE.container("server-fake"), config.INSTANCE.container("client-fake")
    assert {fake_server, fake_client} <= set(lab.implementation_containers(reg))
    assert {"server-fake-route", "client-fake-route"} <= set(lab.route_helpers(reg))
    # servers first, each container once (the client container holds several clients)
    containers = lab.implementation_containers(reg)
    assert len(containers) == len(set(containers))
    assert containers.index(fake_server) < containers.index(config.CLIENT_CONTAINER)


def test_the_manifests_quic_cc_and_versions_derive_from_the_registry(fake: Registry, monkeypatch):
    assert environment.quic_cc(registry()) == {"client": registry().client("curl").quic_cc.describe(),
                                               "server": registry().server("nginx").quic_cc.describe()}
    changed = fake_registry(nginx={"quic_cc": {"fixed": "otherreno (nginx, fixed)"}})
    assert environment.quic_cc(changed)["server"] == "otherreno (nginx, fixed)"

    asked: list[tuple[str, str]] = []

    def answer(container: str, command: str) -> str:
        asked.append((container, command))
        return f"{command} in {container}"

    monkeypatch.setattr(environment, "_exec", answer)
    monkeypatch.setattr(environment.optional, "unavailable_containers", lambda: frozenset())
    monkeypatch.setattr(environment.docker, "server_version", lambda: "27.0")
    monkeypatch.setattr(environment.lab, "states", lambda names: [])  # every on-demand container running
    versions = environment.versions()
    for name, impl in fake.implementations.items():
        assert versions[name] == f"{impl.version} in {impl.container}", name
    assert (fake.server("fakeserver").container, "fake-server --version") in asked


def test_migrating_clients_are_a_registry_capability(fake: Registry):
    assert check.migrating_clients() == {"gtlsclient", "fakeclient"}
    assert registry_module.load().migrating() == {"gtlsclient"}  # the real registry: gtlsclient only
    migrate = parse_path("migrate@1s")
    assert check.unsupported(migrate, "fakeclient", Protocol.H3) is None
    assert check.unsupported(migrate, "fake-1.0", Protocol.H3) is None  # by its alias too
    assert "fakeclient" in (check.unsupported(migrate, "curl", Protocol.H3) or "")
    assert check.unsupported(migrate, "fakeclient", Protocol.H2) is not None


def test_without_migrates_a_client_cannot_migrate(monkeypatch: pytest.MonkeyPatch):
    reg = fake_registry(gtlsclient={"migrates": False}, fakeclient={"migrates": False})
    monkeypatch.setattr(check, "registry", lambda: reg)
    assert check.migrating_clients() == frozenset()
    assert "no registered client" in (check.unsupported(parse_path("migrate@1s"), "gtlsclient", Protocol.H3) or "")


def test_only_clients_migrate():
    with pytest.raises(UsageError, match="implementation 'fakeserver': field 'migrates': only clients"):
        fake_registry(fakeserver={"migrates": True})


def test_help_texts_list_the_registry(fake: Registry):
    assert help_text("server") == ("nginx, ngtcp2, caddy, nginx-sid (or nginx-1.30), haproxy, aioquic, quic-go, quinn, "
                                   "quiche, kwik, fakeserver")
    assert help_text("client").endswith("chromium, aioquic-client, quic-go-client, quinn-client, quiche-client, "
                                        "kwik-client, fakeclient (or fake-1.0)")
    assert "fakeclient: cubic, bbr" in help_text("client_quic_cc")
    assert help_text("sender_quic_cc") == "ngtcp2, aioquic, quinn, quiche"
    assert "fakeserver" in help_text("fixed_quic_cc") and "ngtcp2" not in help_text("fixed_quic_cc")


def test_help_survives_a_broken_registry(monkeypatch: pytest.MonkeyPatch):
    def broken() -> Registry:
        raise UsageError("implementations.toml: no implementations")

    monkeypatch.setattr(registry_module, "registry", broken)
    assert help_text("server") == "see docs/implementations.md"


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_the_clis_help_names_every_implementation_and_alias(command: str):
    r = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    for impl in load().implementations.values():
        for name in (impl.name, *impl.aliases):
            assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), (command, name)


# -- no module lists implementation names by hand ------------------------------------------------------------------

#: (module, the names it holds in one literal): why it may.
JUSTIFIED = {
    ("plan/scenario.py", frozenset({"curl"})): "a scenario's default clients (the registry has no default)",
    ("plan/scenario.py", frozenset({"nginx"})): "a scenario's default servers (the registry has no default)",
    ("run/lab_session.py", frozenset({"curl", "nginx"})): "older manifests' congestion control, which named these two",
    ("bench/overhead.py", frozenset({"curl"})): "the curl command (curl --version), not an implementation",
    ("link/linkem.py", frozenset({"curl"})): "the curl command for linkem's HTTP API, not an implementation",
    ("optional.py", frozenset({"aioquic", "haproxy", "quinn", "quiche", "kwik"})): (
        "the on-demand parts (compose profiles) are named after the stacks they bring; which implementation is in "
        "which part comes from the containers (optional.part_of)"),
    # Not this change's file (lab/evidence/ belongs to the capture code): a registry capability for client qlog
    # would replace it, as `migrates` replaced adverse/check.py's list.
}


def _names() -> set[str]:
    reg = load()
    return set(reg.implementations) | {a for i in reg.implementations.values() for a in i.aliases}


def _literals(path: Path, names: set[str]) -> list[tuple[int, frozenset[str]]]:
    """Lists, tuples, sets and dict keys in the module that hold implementation names as string constants."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        elts = node.elts if isinstance(node, ast.List | ast.Tuple | ast.Set) else \
            node.keys if isinstance(node, ast.Dict) else []
        hit = frozenset(e.value for e in elts if isinstance(e, ast.Constant) and e.value in names)
        if hit:
            found.append((node.lineno, hit))
    return found


def _comparisons(path: Path, names: set[str]) -> list[tuple[int, frozenset[str]]]:
    """Comparisons (==, !=, in, is, ...) and conditional expressions with an implementation name as a string
    constant operand or branch: `if server == "nginx"`, `"nginx" if measured == "ngtcp2" else "ngtcp2"`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        operands = [node.left, *node.comparators] if isinstance(node, ast.Compare) else \
            [node.body, node.orelse] if isinstance(node, ast.IfExp) else []
        hit = frozenset(e.value for e in operands if isinstance(e, ast.Constant) and e.value in names)
        if hit:
            found.append((node.lineno, hit))
    return found


def _help_strings(path: Path, names: set[str]) -> list[tuple[int, frozenset[str]]]:
    """typer options' help= texts that name implementations (a run key example such as 1/h3/curl/nginx/0 is not)."""
    alternatives = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    word = re.compile(rf"(?<![\w./-])({alternatives})(?![\w/-])")
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.keyword) and node.arg == "help":
            text = "".join(n.value for n in ast.walk(node.value)
                           if isinstance(n, ast.Constant) and isinstance(n.value, str))
            hit = frozenset(word.findall(text))
            if hit:
                found.append((node.value.lineno, hit))
    return found


def test_no_module_lists_implementation_names_by_hand():
    names = _names()
    unjustified = []
    for path in sorted(LAB.rglob("*.py")):
        rel = path.relative_to(LAB).as_posix()
        if rel == "endpoints/registry.py":
            continue
        for line, hit in _literals(path, names):
            if (rel, hit) not in JUSTIFIED:
                unjustified.append(f"lab/{rel}:{line}: {sorted(hit)}")
    assert not unjustified, "implementation names listed outside the registry (derive them from it):\n" + \
        "\n".join(unjustified)


def test_no_module_compares_implementation_names_by_hand():
    """What an implementation can do is a registry field (migrates, refuses_migration, competing_quic, ...) or its
    adapter's word (bulk_as_page), never a comparison with its name."""
    names = _names()
    found = [f"lab/{p.relative_to(LAB).as_posix()}:{line}: {sorted(hit)}" for p in sorted(LAB.rglob("*.py"))
             if p.relative_to(LAB).as_posix() != "endpoints/registry.py" for line, hit in _comparisons(p, names)]
    assert not found, "implementation names compared by hand (ask the registry):\n" + "\n".join(found)


def test_the_competing_quic_server_and_page_loading_clients_come_from_the_registry():
    reg = load()
    assert reg.competing_quic("nginx").name == "ngtcp2" and reg.competing_quic("caddy").name == "ngtcp2"
    assert reg.competing_quic("ngtcp2").name == "nginx"  # (the two flows differ by address)
    fake = fake_registry(fakeserver={"competing_quic": 1}, ngtcp2={"competing_quic": 3})
    assert fake.competing_quic("nginx").name == "fakeserver" and fake.competing_quic("fakeserver").name == "nginx"
    with pytest.raises(UsageError, match="implementation 'fakeclient': field 'competing_quic': only servers"):
        fake_registry(fakeclient={"competing_quic": 1})
    with pytest.raises(UsageError, match="no server can serve a competing QUIC download while ngtcp2"):
        fake_registry(nginx={"competing_quic": None}).competing_quic("ngtcp2")
    from lab import endpoints
    from lab.report.workload_report import has_workloads
    from tests.unit.test_stats import make_record

    assert endpoints.loads_bulk_as_page("chromium") and not endpoints.loads_bulk_as_page("curl")
    assert not endpoints.loads_bulk_as_page("a-client-of-an-older-folder")
    assert has_workloads([make_record(client="chromium")]) and not has_workloads([make_record(client="curl")])


def test_every_justified_exception_is_still_there():
    """An exception that no longer matches is removed from JUSTIFIED (the list only shrinks)."""
    names = _names()
    present = {(p.relative_to(LAB).as_posix(), hit) for p in LAB.rglob("*.py") for _, hit in _literals(p, names)}
    assert set(JUSTIFIED) <= present, set(JUSTIFIED) - present


def test_no_cli_help_text_names_implementations_by_hand():
    names = _names()
    found = [f"lab/cli/{p.name}:{line}: {sorted(hit)}" for p in sorted((LAB / "cli").glob("*.py"))
             for line, hit in _help_strings(p, names)]
    assert not found, "help texts must take implementation names from the registry (help_text):\n" + "\n".join(found)


def test_the_scan_finds_a_hand_written_list(tmp_path: Path):
    """The scans themselves can fail: the old forms are caught."""
    names = _names()
    module = tmp_path / "m.py"
    module.write_text('MIGRATING = frozenset({"gtlsclient"})\n'
                      'import typer\n'
                      'def f(server: str = typer.Option("nginx", help="Server: nginx, ngtcp2, caddy.")): ...\n'
                      'def g(server: str) -> str:\n'
                      '    return "nginx" if server == "ngtcp2" else "ngtcp2"\n'
                      'def h(client: str) -> bool:\n'
                      '    return "chromium" != client\n')
    assert _literals(module, names) == [(1, frozenset({"gtlsclient"}))]
    assert _help_strings(module, names) == [(3, frozenset({"nginx", "ngtcp2", "caddy"}))]
    assert set(_comparisons(module, names)) == {(5, frozenset({"nginx", "ngtcp2"})), (5, frozenset({"ngtcp2"})),
                                                (7, frozenset({"chromium"}))}
