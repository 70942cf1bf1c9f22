"""Close codes named in failure texts (lab/explain/closecodes.py) and in the matrix's failure column."""

from __future__ import annotations

from lab.explain import closecodes


def test_codes_get_their_registered_names():
    assert closecodes.named("the server closed the connection: application error 0x105") == (
        "the server closed the connection: application error 0x105 (H3_FRAME_UNEXPECTED)")
    assert closecodes.named("transport error 0xa and application error 0x10C") == (
        "transport error 0xa (PROTOCOL_VIOLATION) and application error 0x10C (H3_REQUEST_CANCELLED)")
    assert closecodes.named("transport error 0x12a") == "transport error 0x12a (CRYPTO_ERROR, TLS alert 42)"
    assert closecodes.named("application error 0x201") == "application error 0x201 (QPACK_ENCODER_STREAM_ERROR)"


def test_unknown_codes_and_named_texts_stay_as_they_are():
    for text in ("application error 0x7f3a", "transport error 0x999", "curl exit code 56: QUIC connection has been "
                 "shut down", "application error 0x105 (H3_FRAME_UNEXPECTED)", "exit code 0x105"):
        assert closecodes.named(text) == text
    assert closecodes.name("application", 0x0) is None  # 0x0 is a transport code, not HTTP/3's


def test_the_matrix_names_a_failed_cells_code():
    from lab.report import matrix
    from tests.unit.test_stats import make_record
    rs = [make_record(status="failed", failure="the server closed the connection: application error 0x105")
          for _ in range(3)]
    assert matrix._failure(rs) == ("the server closed the connection: application error 0x105 "
                                   "(H3_FRAME_UNEXPECTED) (3 of 3 failed runs)")
