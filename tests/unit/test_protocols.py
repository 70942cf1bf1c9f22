import pytest

from lab.errors import UsageError
from lab.protocols import Protocol, parse_protocol


@pytest.mark.parametrize(("text", "expected"), [
    ("h1", Protocol.H1), ("HTTP/1.1", Protocol.H1), ("h2", Protocol.H2), ("http3", Protocol.H3), (" H3 ", Protocol.H3),
])
def test_parse(text, expected):
    assert parse_protocol(text) is expected


def test_unknown_protocol():
    with pytest.raises(UsageError, match=r"'h4'.*h1.*h2.*h3"):
        parse_protocol("h4")


def test_http_versions_match_curl():
    assert [p.http_version for p in Protocol] == ["1.1", "2", "3"]
    assert Protocol.H3.transport == "quic" and Protocol.H2.transport == "tcp"
