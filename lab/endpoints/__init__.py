"""Endpoints: the implementation registry (implementations.toml, registry.py) and the client adapters. A client
adapter turns a TransferRequest into a command for its container and reads the result back; adding an
implementation means one adapter (clients), one image stanza and one registry entry (docs/implementations.md)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from lab import optional
from lab.endpoints.base import ClientAdapter
from lab.endpoints.registry import Implementation, registry
from lab.errors import UsageError

_adapters: dict[str, ClientAdapter] = {}


def get_client(name: str) -> ClientAdapter:
    """The adapter of the client `name` (as the registry names it)."""
    if name not in _adapters:
        impl = registry().client(name)
        module, _, cls = (impl.adapter or "").partition(":")
        try:
            factory = getattr(importlib.import_module(module), cls)
        except (ImportError, AttributeError) as e:
            raise UsageError(f"client {name!r}: cannot load its adapter {impl.adapter!r}: {e}") from None
        _adapters[name] = factory(impl)
    return _adapters[name]


def loads_bulk_as_page(name: str) -> bool:
    """Whether the client loads a bulk run as a page of one object (its adapter's `bulk_as_page`: the browser);
    False for a name the registry does not have (an older folder's)."""
    try:
        return bool(getattr(get_client(name), "bulk_as_page", False))
    except UsageError:
        return False


def check_server(name: str) -> Implementation:
    """The server `name` (as the registry names it): its container, address, TLS name and port."""
    return registry().server(name)


def client_names() -> list[str]:
    return registry().names("client")


def server_names() -> list[str]:
    return registry().names("server")


def require_available(clients: Iterable[str] = (), servers: Iterable[str] = ()) -> None:
    """Refuse (exit 2, one line) when a client or server belongs to an optional part of the lab that could not be
    built here (lab/optional.py): "nginx-sid is unavailable: <why>"."""
    reg = registry()
    for impl in [*(reg.client(n) for n in clients), *(reg.server(n) for n in servers)]:
        optional.require(impl.name, impl.container)
