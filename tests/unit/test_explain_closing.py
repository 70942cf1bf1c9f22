"""How a failed QUIC connection ended, from its rows (lab/explain/closing.py), and explain's use of it."""

from __future__ import annotations

from lab.explain import closing
from lab.explain.rows import FIELDS, Row, parse

C, S = "10.71.1.10", "10.71.2.14"


def initial(t: float, src: str, crypto: list[tuple[int, int]] = (), frames: list[int] = ()) -> Row:  # type: ignore[assignment]
    return Row(number=0, time=t, src=src, long_types=[0], crypto_offsets=[o for o, _ in crypto],
               crypto_lengths=[n for _, n in crypto], quic_frame_types=list(frames))


def fragmented_hello() -> list[Row]:
    """A ClientHello of 1700 bytes in 12 CRYPTO frames over 2 datagrams (as ngtcp2 cuts it), resent twice; the
    server only acknowledges."""
    first = [(k * 100, 100) for k in range(8)]
    second = [(800, 300), (1100, 200), (1300, 250), (1550, 150)]
    rows = [initial(0.0, C, first), initial(0.001, C, second), initial(0.031, S, frames=[0x02])]
    rows += [initial(1.0, C, first), initial(1.001, C, second), initial(3.0, C, first + second[:1])]
    return rows


def test_a_handshake_the_server_never_answered_is_described_from_its_initial_packets():
    why = closing.stalled_handshake(fragmented_hello(), C)
    assert why == ("the handshake did not complete: the client sent its ClientHello (1700 bytes) in 12 CRYPTO "
                   "frames over 2 Initial datagrams, and 5 Initial datagrams with CRYPTO data in all over 3.0 s; "
                   "the server sent 1 datagram (1 Initial), none with CRYPTO data: no ServerHello, its TLS stack "
                   "never got the whole ClientHello or never answered it")


def test_a_handshake_that_got_a_server_hello_is_not_called_stalled():
    rows = fragmented_hello()
    rows.append(initial(0.032, S, [(0, 90)], [0x02, 0x06]))
    assert closing.stalled_handshake(rows, C) is None
    assert closing.stalled_handshake([initial(0.0, S, [(0, 90)])], C) is None  # no client Initial at all
    silent = [r for r in fragmented_hello() if r.src == C]
    assert closing.stalled_handshake(silent, C).endswith("nothing came back from the server")


def test_an_error_close_is_named_with_the_frames_the_client_had_sent():
    rows = [Row(number=1, time=1.000, src=C, short=True, h3_types=[0x4, 0x21 + 0x1F * 7]),
            Row(number=2, time=1.010, src=C, short=True, h3_types=[0x1]),
            Row(number=3, time=1.0411, src=S, short=True, close_app=[0x105]),
            Row(number=4, time=1.05, src=C, short=True, h3_types=[0x0])]
    assert closing.error_close(rows, C, 1.010) == (
        "the server closed the connection 31.1 ms after the client's request: application error 0x105 "
        "(H3_FRAME_UNEXPECTED); HTTP/3 frames the client had sent: SETTINGS, reserved 0xfa, HEADERS (a reserved "
        "type must be ignored by its receiver, RFC 9114 section 7.2.8)")


def test_clean_closes_are_not_errors():
    rows = [Row(number=1, time=1.0, src=C, close_app=[0x100]), Row(number=2, time=1.1, src=S, close_transport=[0])]
    assert closing.error_close(rows, C, 0.5) is None
    rows.append(Row(number=3, time=1.2, src=C, close_transport=[0xA]))
    assert closing.error_close(rows, C, None) == ("the client closed the connection before any request: "
                                                  "transport error 0xa (PROTOCOL_VIOLATION)")


def test_reserved_frame_types():
    assert [closing.h3_frame_name(t) for t in (0x1, 0x21, 0x40, 0x21 + 0x1F * 3, 0x22)] == [
        "HEADERS", "reserved 0x21", "reserved 0x40", "reserved 0x7e", "unknown 0x22"]


def test_tshark_rows_carry_crypto_and_close_fields():
    cols = ["7", "1.5", C] + [""] * (len(FIELDS) - 3)
    cols[18], cols[31], cols[32], cols[34] = "0;0", "0;512", "512;700", "261"
    (row,) = parse("\t".join(cols))
    assert row.crypto_offsets == [0, 512] and row.crypto_lengths == [512, 700] and row.close_app == [0x105]
    old = parse("\t".join(cols[:31]))  # an older tshark line without the new columns
    assert old[0].crypto_offsets == [] and old[0].close_app == []


def test_a_run_without_keys_whose_handshake_stalled_is_described_from_its_initials(tmp_path):
    """No key log (a handshake that never completed has no keys to log): explain reads the Initial packets, which
    tshark decrypts without one, instead of stopping at the missing key log."""
    from lab.explain.folder import explain_run
    from tests.unit.test_explain_analysis import copy_run, fixture_tshark

    def line(n: int, t: float, src: str, crypto: list[tuple[int, int]], frames: str) -> str:
        cols = [str(n), f"{t:.6f}", src] + [""] * (len(FIELDS) - 3)
        cols[16], cols[18], cols[28] = "1208", "0", frames
        cols[31] = ";".join(str(o) for o, _ in crypto)
        cols[32] = ";".join(str(k) for _, k in crypto)
        return "\t".join(cols)

    hello = [(k * 100, 100) for k in range(15)]
    stalled = "\n".join([line(1, 0.0, C, hello[:9], "6"), line(2, 0.0001, C, hello[9:], "6"),
                         line(3, 1.0, C, hello, "6"), line(4, 1.001, S, [], "2")])

    def tshark(pcap, keylog):
        return stalled if keylog is None else fixture_tshark(pcap, keylog)

    r, d = copy_run(tmp_path, "h3")
    (d / "keys.log").unlink()
    e = explain_run(r, d, tshark)
    assert e.status == "not explainable"
    assert e.why.startswith("the handshake did not complete: the client sent its ClientHello (1500 bytes) in 15 "
                            "CRYPTO frames over 2 Initial datagrams"), e.why
    e = explain_run(r, d, fixture_tshark)  # Initials with the server's CRYPTO data: the key log is what is missing
    assert "no TLS key log" in e.why


def test_application_code_zero_is_a_clean_close():
    rows = [Row(number=1, time=1.0, src=C, close_app=[0x0])]
    assert closing.first_error(rows, C) is None and closing.error_close(rows, C, 0.5) is None


def test_explain_puts_the_servers_error_close_first_and_the_clients_last(tmp_path):
    from lab.explain.folder import explain_run
    from lab.explain.rows import client_of
    from tests.unit.test_explain_analysis import copy_run, fixture_tshark

    r, d = copy_run(tmp_path, "h3")
    base = fixture_tshark(d / "client-side.pcap", d / "keys.log")
    rows = parse(base)
    client = client_of(rows)
    server = next(x.src for x in rows if x.src != client)

    def closing_line(src: str, code: int) -> str:
        cols = [str(rows[-1].number + 1), f"{rows[-1].time + 0.001:.6f}", src] + [""] * (len(FIELDS) - 3)
        cols[34] = str(code)
        return "\t".join(cols)

    for src, code, first in ((server, 0x105, True), (client, 0x10C, False)):
        text = base.rstrip("\n") + "\n" + closing_line(src, code) + "\n"
        e = explain_run(r, d, lambda pcap, keys, text=text: text if pcap.name == "client-side.pcap"
                        else fixture_tshark(pcap, keys))
        assert e.status == "explained"
        who = "server" if first else "client"
        where = e.reasons[0] if first else e.reasons[-1]
        assert where.text.startswith(f"the {who} closed the connection "), [x.text for x in e.reasons]


def test_a_failed_runs_own_close_by_the_client_comes_first_with_its_reason_phrase(tmp_path):
    """quinn-client -> nginx (results/reference/matrix-goodput): the client ends the connection itself, INTERNAL_ERROR
    "too many gaps in stream buffer" (quinn-proto's reassembly limit, hit under heavy loss): in a failed run that
    close is the failure, so it is the first reason (what stands beside a matrix cell), with the sender's words."""
    from dataclasses import replace

    from lab.explain.folder import explain_run
    from lab.explain.rows import client_of
    from tests.unit.test_explain_analysis import copy_run, fixture_tshark

    r, d = copy_run(tmp_path, "h3")
    base = fixture_tshark(d / "client-side.pcap", d / "keys.log")
    rows = parse(base)
    cols = [str(rows[-1].number + 1), f"{rows[-1].time + 0.001:.6f}", client_of(rows)] + [""] * (len(FIELDS) - 3)
    cols[33], cols[35] = "1", "too many gaps in stream buffer"
    text = base.rstrip("\n") + "\n" + "\t".join(cols) + "\n"

    def tshark(pcap, keys):
        return text if pcap.name == "client-side.pcap" else fixture_tshark(pcap, keys)

    said = 'transport error 0x1 (INTERNAL_ERROR), reason "too many gaps in stream buffer"'
    failed = explain_run(replace(r, status="failed", failure="client exit code 1"), d, tshark)
    assert failed.reasons[0].text.startswith("the client closed the connection "), [x.text for x in failed.reasons]
    assert said in failed.reasons[0].text
    ok = explain_run(r, d, tshark)  # a run that transferred: the client's close is a footnote
    assert ok.reasons[-1].text.startswith("the client closed the connection ") and said in ok.reasons[-1].text
    assert not ok.reasons[0].text.startswith("the client closed")


def test_a_hello_the_server_answered_only_when_resent_is_named():
    rows = fragmented_hello()  # two flights of the ClientHello, an ACK, a third resend
    rows.append(initial(3.2, S, [(0, 90)], [0x02, 0x06]))
    assert closing.hello_resent(rows, C) == (
        "the server answered the ClientHello (1700 bytes, 12 CRYPTO frames in its first flight of 2 datagrams) only "
        "3200 ms after it was first sent, when the client had sent 5 Initial datagrams of it")
    first = [*fragmented_hello()[:2], initial(0.03, S, [(0, 90)], [0x02, 0x06])]
    assert closing.hello_resent(first, C) is None  # answered at once
    assert closing.hello_resent(fragmented_hello(), C) is None  # never answered: stalled_handshake's case


def test_a_loss_never_repaired_and_a_missing_response_are_said_not_printed_as_none():
    """A connection that died (quinn-client -> nginx, quiche-client -> kwik): its first loss was not repaired in the
    capture and no response HEADERS came back; the reasons say so instead of "repaired in None ms", "TTFB None ms"."""
    from lab.explain.analyze import _reasons
    from lab.explain.model import Explanation, Figure, Handshake, LossRecovery

    def f(v):
        return Figure(value=v)

    e = Explanation(run_key="0/h3/quinn-client/nginx/0", protocol="h3", transport="quic", status="explained",
                    handshake=Handshake(round_trips=f(1), expected_round_trips=1, handshake_ms=f(33.6),
                                        ttfb_ms=f(None)),
                    loss=LossRecovery(data_packets=f(5718), data_packets_lost=f(2545), retransmissions=f(0),
                                      bytes_retransmitted=f(0), spurious_retransmissions=f(0), timeouts=f(0),
                                      first_loss_offset=f(29146), first_loss_ms=f(56.4),
                                      first_loss_repair_ms=f(None)))
    texts = [r.text for r in _reasons(e, None)]  # type: ignore[arg-type]
    assert "handshake: 1 round trips before the request, no response" in texts
    assert any(t.endswith("after 56.4 ms, not repaired in the capture") for t in texts), texts
    assert not any("None" in t for t in texts), texts
