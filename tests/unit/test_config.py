"""Settings from the environment and .env (python-dotenv): checked, one line naming the variable and value."""

from __future__ import annotations

import os
import stat

import pytest

from lab import config, lab
from lab.errors import UsageError


@pytest.fixture
def dotenv(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("QUICLAB_"):
            monkeypatch.delenv(name)
    path = tmp_path / ".env"
    monkeypatch.setattr(config, "ENV_FILE", path)
    return path


def test_defaults_without_env_or_dotenv(dotenv):
    assert (config.prometheus_port(), config.pushgateway_port(), config.grafana_port()) == (9090, 9091, 3000)
    assert config.timeout_s() == 120 and config.grafana_enabled()
    assert config.pushgateway_urls()[1] == "http://127.0.0.1:9091"
    config.check_all()


def test_environment_wins_over_dotenv_which_wins_over_the_default(dotenv, monkeypatch):
    dotenv.write_text("# comment\nQUICLAB_TIMEOUT='30'\nexport QUICLAB_PROMETHEUS_PORT=19090\nQUICLAB_GRAFANA=\n")
    assert config.timeout_s() == 30 and config.prometheus_port() == 19090
    assert config.grafana_enabled()  # empty = unset = default
    monkeypatch.setenv(config.ENV_TIMEOUT, "45.5")
    assert config.timeout_s() == 45.5


def test_an_edit_of_dotenv_is_seen_at_once_even_of_the_same_size(dotenv):
    """.env is parsed once per distinct text (settings are read several times per run), never served stale."""
    dotenv.write_text("QUICLAB_TIMEOUT=30\n")
    assert config.timeout_s() == 30 and config.timeout_s() == 30
    dotenv.write_text("QUICLAB_TIMEOUT=40\n")  # same size, likely the same mtime tick
    assert config.timeout_s() == 40
    dotenv.write_text("QUICLAB_TIMEOUT=40\nnot an assignment\n")
    with pytest.raises(UsageError):
        config.timeout_s()


@pytest.mark.parametrize(("name", "value", "accessor"), [
    (config.ENV_TIMEOUT, "abc", config.timeout_s),
    (config.ENV_TIMEOUT, "nan", config.timeout_s),
    (config.ENV_TIMEOUT, "-1", config.timeout_s),
    (config.ENV_PROMETHEUS_PORT, "0", config.prometheus_port),
    (config.ENV_PUSHGATEWAY_PORT, "+80", config.pushgateway_port),
    (config.ENV_GRAFANA_PORT, "65536", config.grafana_port),
    (config.ENV_PUSHGATEWAY_URL, "127.0.0.1:9091", config.pushgateway_urls),  # no scheme
    (config.ENV_PUSHGATEWAY_URL, "http://gw:port", config.pushgateway_urls),
    (config.ENV_PUSHGATEWAY_URL, "http://gw:9091/?a=1", config.pushgateway_urls),
    (config.ENV_GRAFANA, "sometimes", config.grafana_enabled),
    (config.ENV_AGENT, "fast", config.agent_enabled),
    (config.ENV_GRAFANA_TAG, "11.2.0 latest", config.grafana_image),
    (config.ENV_LINKEM_SPIN_US, "10001", config.linkem_spin_us),
    (config.ENV_LINKEM_NAPI, "threaded", config.linkem_napi),
])
def test_bad_values_name_variable_value_and_source(dotenv, monkeypatch, name, value, accessor):
    monkeypatch.setenv(name, value)
    with pytest.raises(UsageError) as e:
        accessor()
    assert f"invalid {name} {value!r} (set in the environment): allowed is" in str(e.value)
    with pytest.raises(UsageError):
        config.check_all()
    monkeypatch.delenv(name)
    dotenv.write_text(f"{name}={value!r}\n")
    with pytest.raises(UsageError, match=str(dotenv)):
        accessor()


def test_pushgateway_url_override_and_off(dotenv, monkeypatch):
    monkeypatch.setenv(config.ENV_PUSHGATEWAY_URL, "https://gw.example:9443/prefix/")
    assert config.pushgateway_urls() == ["https://gw.example:9443/prefix"]
    for off in ("off", "OFF", "none", "0"):
        monkeypatch.setenv(config.ENV_PUSHGATEWAY_URL, off)
        assert config.pushgateway_urls() == []


def test_a_malformed_dotenv_line_is_named(dotenv):
    dotenv.write_text("QUICLAB_TIMEOUT=10\nnot an assignment\n")
    with pytest.raises(UsageError, match=r"invalid line 2 in .*\.env: 'not an assignment'"):
        config.timeout_s()


def test_the_lab_is_not_touched_with_a_bad_setting(dotenv, monkeypatch):
    monkeypatch.setenv(config.ENV_GRAFANA_PORT, "x")
    monkeypatch.setattr(lab.docker, "require_engine", lambda: pytest.fail("the Docker engine was asked first"))
    with pytest.raises(UsageError, match=config.ENV_GRAFANA_PORT):
        lab.require_up()


def test_grafana_password_is_added_to_dotenv_keeping_the_rest(dotenv):
    dotenv.write_text("QUICLAB_BASE_IMAGE=quiclab/base:trixie\n# keep me\nQUICLAB_TIMEOUT='30'")
    lab.ensure_grafana_password()
    text = dotenv.read_text()
    assert text.startswith("QUICLAB_BASE_IMAGE=quiclab/base:trixie\n# keep me\nQUICLAB_TIMEOUT='30'\n")
    password = config.setting(config.ENV_GRAFANA_ADMIN_PASSWORD, "")
    assert len(password) >= 24 and f"{config.ENV_GRAFANA_ADMIN_PASSWORD}={password}\n" in text
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600
    lab.ensure_grafana_password()  # kept, not replaced
    assert config.setting(config.ENV_GRAFANA_ADMIN_PASSWORD, "") == password


def test_grafana_password_creates_dotenv(dotenv):
    lab.ensure_grafana_password()
    assert dotenv.read_text().startswith(config.ENV_GRAFANA_ADMIN_PASSWORD + "=")
    assert stat.S_IMODE(dotenv.stat().st_mode) == 0o600
