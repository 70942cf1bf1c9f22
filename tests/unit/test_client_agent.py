"""The client agent's curl config (images/client/agent.py curl_config): what a prestarted curl reads on stdin.
Read back by the real curl in tests/lab/test_agent.py."""

from __future__ import annotations

from tests.client_agent import load as _module


def test_every_option_on_its_own_line_values_quoted_the_url_as_url():
    m = _module()
    text = m.curl_config(["--http3-only", "--resolve", "s:443:10.0.0.1", "--max-time", "30", "https://s/obj/1",
                          "-w", 'say "hi"\\\n'])
    assert text.splitlines() == ['--http3-only', '--resolve "s:443:10.0.0.1"', '--max-time "30"',
                                 'url = "https://s/obj/1"', '-w "say \\"hi\\"\\\\\\n"']


def test_an_option_of_unknown_arity_or_a_missing_value_gives_no_config():
    m = _module()
    assert m.curl_config(["--retry", "3", "https://s/"]) is None  # a fetch with it starts its own curl
    assert m.curl_config(["--max-time"]) is None


def test_a_fetch_ended_by_a_signal_is_told_apart():
    m = _module()
    assert m._stopped('{"exit": -15, "sha256": ""}') and not m._stopped('{"exit": 28}')
    assert not m._stopped("not json")
