"""netem's counters from `tc -s -j qdisc show` (lab/link/counters.py), on real output: tests/data/tc holds what
Debian trixie's 6.12 kernel (iproute2 6.15) printed in the VM of scripts/vm.sh after datagrams crossed a veth
shaped as lab/link/netem.py shapes it:

  loss.json      netem loss random 3 %, 2000 datagrams: sent 1937, dropped 63
  loss2-tbf.json netem delay 5 ms loss 2 % + tbf 2 Mbit/s limit 6000 bytes, 500 datagrams of 1400 bytes at once:
                 netem dropped 491 (its loss and everything tbf refused), tbf 478
  codel.json, fq_codel.json, pie.json, pfifo_head_drop.json: netem delay 2 ms + tbf 2 Mbit/s + the discipline
                 (limit 20 packets, 5 for pfifo_head_drop), 500 datagrams: each reports the drops of the tbf above
  prio-loss3.json the tree the lab installs since 2026-11-28 (a prio root, IPv4 through netem under band 1:2),
                 lab/link/netem.py's own plan for loss 3 %, seed 7; 2000 datagrams, the neighbour table flushed
                 before every 100th (ARP): netem sent 1938, dropped 62; 25 frames went past it. Printed with
                 `tc -s -j qdisc show dev va`, which leaves out the device: "dev": "va" added to each qdisc
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.link import counters

DATA = Path(__file__).parent.parent / "data" / "tc"


def _qdiscs(name: str) -> list[counters.TcQdisc]:
    return counters.parse_tc((DATA / f"{name}.json").read_text())["va"]


def test_loss_only_counts_the_loss_model_and_everything_that_entered():
    c = counters.netem_direction(_qdiscs("loss3"), delivered_packets=1937, delivered_bytes=0)
    assert (c.received, c.loss_drops, c.queue_drops) == (2000, 63, 0)
    assert c.loss_rate == pytest.approx(63 / 2000)


def test_tbf_refusals_are_queue_drops_not_loss():
    c = counters.netem_direction(_qdiscs("loss2-tbf"), delivered_packets=10, delivered_bytes=0)
    # netem's 491 drops hold tbf's 478: 13 by the loss model (2 % of ~500: 10 expected)
    assert (c.loss_drops, c.queue_drops) == (13, 478)
    assert c.received == 10 + 491  # 500 datagrams and one IPv6 packet of the interface's own


@pytest.mark.parametrize("aqm", ["codel", "fq_codel", "pie", "pfifo_head_drop"])
def test_a_queue_discipline_under_tbf_is_counted_once_as_queue_drops(aqm):
    qs = _qdiscs(aqm)
    child = next(q for q in qs if q.parent == "10:1")
    c = counters.netem_direction(qs, delivered_packets=0, delivered_bytes=0)
    assert child.kind == aqm and child.drops > 400
    assert c.queue_drops == child.drops and c.loss_drops == 0
    assert c.received in (500, 501)  # 500 datagrams (and, in some captures, one IPv6 packet of the interface's own)


def test_codel_drops_at_dequeue_reach_the_ancestors():
    """CoDel dropped one packet at dequeue (drops 470, 469 of them over its limit at enqueue); tbf and netem count
    470 too: the kernel adds a child's later drops to every ancestor, so tbf's drops are all the queue's."""
    raw = json.loads((DATA / "codel.json").read_text())
    codel = next(q for q in raw if q["kind"] == "codel")
    assert codel["drops"] - codel["drop_overlimit"] == 1
    c = counters.netem_direction(_qdiscs("codel"), 0, 0)
    assert c.queue_drops == 470 and c.loss_drops == 0


def test_what_is_not_ipv4_passes_netem_and_is_not_counted():
    """The VM's explain test once found 35 drops in netem's counters and 34 in the run's captures: netem was the
    root and shaped ARP too. Under the prio root only IPv4 enters netem: the counters are netem's, not the root's."""
    qs = _qdiscs("prio-loss3")
    root, netem = next(q for q in qs if q.root), next(q for q in qs if q.kind == "netem")
    assert (root.kind, netem.parent) == ("prio", "1:2")
    c = counters.netem_direction(qs, delivered_packets=1977, delivered_bytes=0)
    assert (c.received, c.loss_drops, c.queue_drops) == (2000, 62, 0)  # the 2000 datagrams, none of the ARP
    assert root.packets + root.drops - c.received == 25  # what went past netem: ARP after each flush


def test_a_direction_without_netem_drops_nothing():
    c = counters.netem_direction([counters.TcQdisc(kind="noqueue", handle="0:", root=True)], 42, 4200)
    assert (c.received, c.loss_drops, c.queue_drops, c.packets, c.bytes) == (42, 0, 0, 42, 4200)
    assert counters.netem_direction([], 5, 50).received == 5


def test_snapshot_difference_over_a_run():
    """Before: the qdiscs as installed (all zero); after: the real output. Bytes and packets come from the
    interface counters (IP bytes: 14 bytes per frame off); host drops stay unknown under netem."""
    after_text = (DATA / "loss2-tbf.json").read_text()
    zero = [{**q, "packets": 0, "drops": 0, "qlen": 0, "bytes": 0} for q in json.loads(after_text)]
    before = counters.parse_netem(json.dumps(zero), "va", "vb", (0, 0, 1000, 10))
    after = counters.parse_netem(after_text, "va", "vb", (14420, 10, 1000 + 14 * 5 + 500, 15))
    d = after - before
    assert (d.down.received, d.down.loss_drops, d.down.queue_drops) == (501, 13, 478)
    assert (d.down.packets, d.down.bytes) == (10, 14420 - 14 * 10)
    assert (d.up.received, d.up.loss_drops, d.up.queue_drops, d.up.packets, d.up.bytes) == (5, 0, 0, 5, 500)
    assert d.down.host_drops is None and d.up.host_drops is None


@pytest.mark.parametrize("text", ["", "{", "[{\"handle\": \"1:\"}]", "{\"kind\": \"netem\"}"])
def test_unreadable_tc_output_is_refused(text):
    with pytest.raises(counters.BadTcOutput):
        counters.parse_tc(text)
