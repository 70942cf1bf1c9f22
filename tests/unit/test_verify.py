from lab.models import ClientReport, TransferRequest
from lab.protocols import Protocol
from lab.run.transfer import verify

SHA = "cd" * 32


def check(report: ClientReport, protocol: Protocol = Protocol.H3, size: int = 1000):
    request = TransferRequest(protocol=protocol, size=size, url="https://x/obj/1000", timeout_s=5)
    return verify(request, report, SHA, client="curl", server="nginx", wall_s=0.2)


def good(**kw) -> ClientReport:
    base = dict(exit_code=0, http_version="3", bytes=1000, sha256=SHA, handshake_s=0.01, ttfb_s=0.02, total_s=0.1)
    base.update(kw)
    return ClientReport(**base)


def test_good_transfer():
    r = check(good())
    assert r.ok and r.failure == "" and r.goodput_bps == 1000 * 8 / 0.1


def test_protocol_mismatch_fails_loudly():
    r = check(good(http_version="2"))
    assert not r.ok and "HTTP/3" in r.failure and "HTTP/2" in r.failure and r.goodput_bps is None


def test_size_mismatch():
    assert "999" in check(good(bytes=999)).failure


def test_hash_mismatch():
    assert "SHA-256" in check(good(sha256="00" * 32)).failure


def test_exit_code_checked_first():
    r = check(good(exit_code=7, error="Failed to connect"))
    assert not r.ok and "exit code 7" in r.failure and "Failed to connect" in r.failure
