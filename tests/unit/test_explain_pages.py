"""Head-of-line per stream on a real page load the lab made (tests/data/explain/pages/README.md): 4 objects of
20 kB over one HTTP/2 connection and over HTTP/3, curl -> nginx 1.26, 20 Mbit/s, 40 ms RTT, 5 % loss, seed 5.

Hand counts (times from the client's first packet, offsets of the TCP byte stream / the QUIC stream; listed with
`parse(client-side.tsv)`: a server segment starting above the highest byte received so far opens or widens a hole,
one ending at or below it re-sends):
- h2: the server-side capture's HTTP/2 frames map bytes 0-23019 to stream 1, 23020-43291 to 3, 43292-63563 to 5,
  63564-83505 to 7. Holes: 8540-9987 (9988- arrives at 135.582 ms, re-sent copy at 178.538: stream 1 holds
  9988-21571 = 11584 bytes for 42.956 ms); 31708-33155 (33156- at 223.372, filled at 269.682: stream 3 holds
  33156-43291 = 10136 bytes, 46.310 ms) with 43292-44739 (44740- at 234.709, filled at 276.679: stream 5 holds
  44740-63563 = 18824 bytes, 41.970 ms; stream 7 holds 63564-72251 = 8688 bytes); 76596-78043 (78044- at 298.804,
  filled at 340.014: stream 7 holds 78044-83505 = 5462 more, 41.210 ms). 3 hole episodes; every stream held.
- h3: stream 0 misses 8220-9395 (9396- at 88.828 ms, re-sent at 130.377: 10775 bytes held, 41.549 ms); stream 4
  misses 7044-8219 and 16452-17625 (8220- at 96.298, filled at 137.916 and 140.932: 11951 - 1174 = 10777 bytes,
  longest 41.618 ms); stream 12 misses 3518-4691 (4692- at 110.728, filled at 216.638: 15479 bytes, 105.910 ms);
  stream 8 lost nothing and waited for nothing (a QUIC hole holds only its own stream).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.explain import folder as explain_folder
from lab.results.schema import read_runs

PAGES = Path(__file__).parents[1] / "data" / "explain" / "pages"


def explained(protocol: str):
    (record,) = [r for r in read_runs(PAGES / "runs.csv").records if r.protocol == protocol]
    evdir = PAGES / "evidence" / f"0_{protocol}_curl_nginx_0"
    return explain_folder.explain_run(record, evdir, lambda pcap, keylog: pcap.with_suffix(".tsv").read_text())


def test_http2_streams_behind_a_tcp_hole_wait_for_it():
    e = explained("h2")
    assert e.status == "explained", e.why
    h = e.head_of_line
    assert h is not None and h.level == "tcp byte stream"
    assert (h.holes.value, h.streams.value, h.streams_held.value, h.bytes_held.value) == (3, 4, 4, 54694)
    per = {s.stream_id: s for s in h.per_stream}
    assert {k: (s.bytes_held, s.holes) for k, s in per.items()} == {
        1: (11584, 1), 3: (10136, 1), 5: (18824, 1), 7: (8688 + 5462, 2)}
    assert per[1].hole_fill_delay_ms == pytest.approx(42.956, abs=0.002)
    assert per[3].hole_fill_delay_ms == pytest.approx(46.310, abs=0.002)
    assert per[5].hole_fill_delay_ms == pytest.approx(41.970, abs=0.002)
    assert per[7].hole_fill_delay_ms == pytest.approx(41.210, abs=0.002)
    assert all(s.hole_fill_delay_ms > 0 for s in per.values())  # issue 25's acceptance: positive for HTTP/2
    assert any("head-of-line (tcp byte stream): 4 of 4 streams" in r.text for r in e.reasons)


def test_an_http3_hole_holds_only_its_own_stream():
    e = explained("h3")
    assert e.status == "explained", e.why
    h = e.head_of_line
    assert h is not None and h.level == "quic stream"
    assert (h.holes.value, h.streams.value, h.streams_held.value, h.bytes_held.value) == (3, 4, 3, 37031)
    per = {s.stream_id: s for s in h.per_stream}
    assert {k: s.bytes_held for k, s in per.items()} == {0: 10775, 4: 10777, 8: 0, 12: 15479}
    assert per[0].hole_fill_delay_ms == pytest.approx(41.549, abs=0.002)
    assert per[4].hole_fill_delay_ms == pytest.approx(41.618, abs=0.002)
    assert per[12].hole_fill_delay_ms == pytest.approx(105.910, abs=0.002)
    assert per[8].hole_fill_delay_ms == 0.0
    assert h.longest_hole_fill_delay_ms.value == pytest.approx(105.910, abs=0.002)
