"""The client image's agent (images/client/agent.py: a script, not a package) loaded as a module, for tests of its
pure parts (curl_config, _stopped) on the host."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from types import ModuleType

from lab import config


def load() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("quiclab_client_agent",
                                                  str(config.ROOT / "images" / "client" / "agent.py"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
