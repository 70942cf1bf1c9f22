"""The stack matrix (`quiclab matrix`, issue 33): every server x client pair over HTTP/3, and the TCP baselines over
HTTP/1.1 and HTTP/2, on one of the QUIC interop runner's links. The matrix is an ordinary sweep: its scenario
(lab/plan/presets/matrix-*.toml, `matrix = "<link>"`) is completed here from the implementation registry, so a
stack added to the registry joins the matrix with no change anywhere else.

A matrix scenario's clients and servers default to every client and server of the registry; the TCP baselines are
the registry's `tcp_baseline` clients against its `tcp_baseline` servers (lab/endpoints/registry.py), added to the
lists when a narrower matrix (--servers/--clients) leaves them out, and the only pairs that run HTTP/1.1 and HTTP/2
(`tcp_pairs`). A pair that cannot talk over HTTP/3 is planned all the same: the runner records it as
`unsupported` with the registry's reason before it runs (lab/plan/support.py), a row of the matrix.

The completed scenario is what the sweep's manifest keeps, so a resumed matrix runs the pairs it started with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lab.endpoints.registry import Registry, Role
from lab.errors import UsageError

#: The matrix's links -> their presets (lab/plan/presets/<preset>.toml), the interop runner's conditions:
#: goodput: 10 MiB over 10 Mbit/s each way, 30 ms RTT, 25-packet drop-tail queues; crosstraffic: 25 MiB against a
#: TCP CUBIC flow on the same link; satellite: 20/2 Mbit/s, 600 ms RTT, 25-packet queues, without and with 1 % loss.
LINKS: dict[str, str] = {
    "goodput": "matrix-goodput",
    "crosstraffic": "matrix-crosstraffic",
    "satellite": "matrix-satellite",
    "satellite-loss": "matrix-satellite-loss",
}
ALL = "all"
#: The link on which a cell under this efficiency (goodput / link rate) at 0 % loss needs a why (issue 33 item 4).
WHY_LINK = "goodput"
WHY_EFFICIENCY = 0.8


def parse_links(text: str) -> list[str]:
    """--link: one link, a comma list, or all (in LINKS order); an unknown one exits 2 naming it."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    if names == [ALL]:
        return list(LINKS)
    bad = [n for n in names if n not in LINKS]
    if bad or not names:
        raise UsageError(f"invalid --link {text!r}: allowed are {', '.join(LINKS)} (a comma list) or {ALL}")
    return list(dict.fromkeys(names))


def parse_names(text: str, role: Role, reg: Registry) -> list[str]:
    """--servers/--clients: registry names (or aliases) of that role, as the registry names them; an unknown one
    exits 2 with one line naming it and the allowed names (from the registry)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise UsageError(f"invalid --{role}s {text!r}: give a comma list of {reg.listing(role)}")
    out = []
    for name in names:
        impl = reg.implementations.get(reg.canonical(name))
        if impl is None or impl.role != role:
            raise UsageError(f"invalid --{role}s: unknown {role} {name!r}: allowed are {reg.listing(role)}")
        out.append(impl.name)
    return list(dict.fromkeys(out))


def complete(data: Mapping[str, Any], reg: Registry) -> dict[str, Any]:
    """A matrix scenario's clients, servers, protocols, pairs and tcp_pairs from the registry (see the module
    docstring); a scenario without `matrix` is returned as it is. Names given are kept (their canonical form is
    the scenario's own check); the baselines are added after them."""
    out = dict(data)
    if not out.get("matrix"):
        return out
    clients = _given(out.get("clients"), reg.names("client"), reg)
    servers = _given(out.get("servers"), reg.names("server"), reg)
    baselines = out.get("tcp_pairs")
    if baselines is None:
        baselines = [f"{c}>{s}" for c, s in reg.tcp_baselines()]
    base_pairs = [tuple(p.split(">", 1)) for p in baselines if isinstance(p, str) and ">" in p]
    all_clients = list(dict.fromkeys([*clients, *(c for c, _ in base_pairs)]))
    all_servers = list(dict.fromkeys([*servers, *(s for _, s in base_pairs)]))
    out["clients"], out["servers"], out["tcp_pairs"] = all_clients, all_servers, list(baselines)
    out.setdefault("protocols", ["h1", "h2", "h3"])
    if "pairs" not in out and (all_clients != clients or all_servers != servers):
        # the HTTP/3 matrix stays the servers and clients asked for: the baselines' extra stacks only run TCP
        out["pairs"] = [f"{c}>{s}" for s in servers for c in clients]
    return out


def _given(value: object, every: Sequence[str], reg: Registry) -> list[str]:
    if not isinstance(value, list):
        return list(every)
    return [reg.canonical(v) if isinstance(v, str) else v for v in value]


#: Evidence a why run keeps: everything `quiclab explain` reads (lab/explain)
WHY_CAPTURE = ["pcap", "keylog", "qlog"]


def why_scenario(data: Mapping[str, Any], cells: Sequence[tuple[str, str, str]], repeats: int = 1) -> dict[str, Any]:
    """A finished matrix's scenario (its manifest's, completed) narrowed to captured runs of each cell that
    needs a why ((protocol, client, server)): the same link, seed and object, only those pairs and protocols,
    `repeats` repeats (1 unless asked), every kind of evidence (`quiclab matrix --why`)."""
    out = dict(data)
    h3 = [f"{c}>{s}" for p, c, s in cells if p == "h3"]
    tcp = [f"{c}>{s}" for p, c, s in cells if p != "h3"]
    out["clients"] = list(dict.fromkeys(c for _, c, _ in cells))
    out["servers"] = list(dict.fromkeys(s for _, _, s in cells))
    out["protocols"] = sorted({p for p, _, _ in cells})
    out["pairs"], out["tcp_pairs"] = h3 or tcp, tcp
    out["repeats"], out["capture"] = repeats, list(WHY_CAPTURE)
    return out
