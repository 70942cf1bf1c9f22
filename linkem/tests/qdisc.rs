//! Queue disciplines in the pipeline, in virtual time, against their
//! published behaviour: drop-head keeps the newest packets, CoDel and PIE
//! hold a bulk flow's standing queue near their target delay, fq_codel
//! shares the link equally between backlogged flows and serves a sparse
//! flow first, ECN-capable packets are marked instead of dropped.

mod common;

use common::*;
use linkem::pipeline::Pipeline;
use linkem::stats::DropCause;
use linkem::time::{Time, NS_PER_MS};
use serde_json::json;

#[test]
fn drop_head_keeps_the_newest() {
    let cfg = |kind: &str| {
        dir(json!({"rate_bps": 12_000_000, "queue_limit_packets": 10, "qdisc": {"kind": kind}}))
    };
    let arr = periodic(50, 1500, 0, Time::ZERO);
    let tail = run(&cfg("drop_tail"), 1, &arr);
    let head = run(&cfg("drop_head"), 1, &arr);
    let seqs = |o: &Outcome| o.delivered.iter().map(|d| d.0).collect::<Vec<_>>();
    assert_eq!(seqs(&tail), (0..10).collect::<Vec<_>>());
    // Packet 0 is on the link at once; the queue keeps the newest 9.
    let mut want = vec![0];
    want.extend(41..50);
    assert_eq!(seqs(&head), want);
    assert_eq!(head.drops_of(DropCause::Queue), 40);
}

/// 20 Mbit/s, 10 ms each way, a 1 MB buffer (~400 ms at the rate) that a
/// drop-tail queue lets a bulk flow fill; ACKs come back after 10 ms.
fn bulk(qdisc: serde_json::Value, secs: u64) -> AimdOutcome {
    let cfg = dir(json!({"rate_bps": 20_000_000, "delay_us": 10_000,
                         "queue_limit_bytes": 1_000_000, "qdisc": qdisc}));
    let mut pipe = Pipeline::new(&cfg, 1, 1, Time::ZERO);
    aimd_run(&mut pipe, 10 * NS_PER_MS, secs, 1500)
}

/// Median and 90th percentile queueing delay (one-way time minus delay and
/// serialization), ms, of packets sent after the first 5 s.
fn queueing_ms(o: &AimdOutcome) -> (f64, f64) {
    let q: Vec<u64> = o
        .one_way_after(Time::from_secs(5))
        .iter()
        .map(|&d| d.saturating_sub(10 * NS_PER_MS + 600_000))
        .collect();
    (
        quantile(&q, 0.5) as f64 / 1e6,
        quantile(&q, 0.9) as f64 / 1e6,
    )
}

#[test]
fn codel_holds_a_bulk_flows_standing_queue_near_target() {
    let tail = bulk(json!({"kind": "drop_tail"}), 30);
    let codel = bulk(json!({"kind": "codel"}), 30);
    let (t50, _) = queueing_ms(&tail);
    let (c50, c90) = queueing_ms(&codel);
    // Drop-tail: the flow fills the buffer, hundreds of ms.
    assert!(t50 > 100.0, "drop-tail median queueing delay {t50} ms");
    // CoDel (target 5 ms, interval 100 ms): near the target.
    assert!(
        c50 < 10.0 && c90 < 25.0,
        "CoDel queueing delay median {c50} ms, p90 {c90} ms"
    );
    let rate = codel.goodput_bps(Time::from_secs(5), Time::from_secs(30), 1500);
    assert!(rate > 0.9 * 20e6, "CoDel goodput {rate}");
    assert!(codel.drops > 0 && codel.marks() == 0);
}

#[test]
fn codel_with_ecn_marks_instead_of_dropping() {
    let o = bulk(json!({"kind": "codel", "ecn": true}), 20);
    let (c50, _) = queueing_ms(&o);
    assert!(o.marks() > 10, "{} marks", o.marks());
    assert_eq!(o.drops, 0, "ECT packets are marked, not dropped");
    assert!(c50 < 10.0, "median queueing delay {c50} ms");
}

#[test]
fn pie_holds_a_bulk_flows_queue_delay_near_target() {
    let o = bulk(json!({"kind": "pie"}), 30);
    let q: Vec<u64> = o.one_way_after(Time::from_secs(5));
    let mean = q.iter().sum::<u64>() as f64 / q.len() as f64 / 1e6 - 10.6;
    // PIE's target is 15 ms (the mean queueing delay it steers to).
    assert!(
        (5.0..=30.0).contains(&mean),
        "PIE mean queueing delay {mean} ms"
    );
    let rate = o.goodput_bps(Time::from_secs(5), Time::from_secs(30), 1500);
    assert!(rate > 0.9 * 20e6, "PIE goodput {rate}");
}

/// Two unresponsive flows offered 8 and 4 Mbit/s, and a sparse one (one
/// 200-byte packet every 20 ms), into 6 Mbit/s.
fn mixed(kind: &str) -> (Outcome, Vec<Arrival>) {
    let mut arr = Vec::new();
    for (flow, gap) in [(0u16, 1_500_000u64), (1, 3_000_000)] {
        for a in periodic(4_000, 1500, gap, Time::from_micros(flow as u64)) {
            arr.push(Arrival { flow, ..a });
        }
    }
    for a in periodic(300, 200, 20 * NS_PER_MS, Time::from_micros(7)) {
        arr.push(Arrival { flow: 2, ..a });
    }
    arr.retain(|a| a.at < Time::from_secs(6));
    arr.sort_by_key(|a| a.at);
    let cfg =
        dir(json!({"rate_bps": 6_000_000, "queue_limit_bytes": 200_000, "qdisc": {"kind": kind}}));
    (run(&cfg, 1, &arr), arr)
}

fn share(o: &Outcome, arr: &[Arrival], flow: u16) -> f64 {
    let window = |t: Time| t >= Time::from_secs(1) && t < Time::from_secs(6);
    let bytes = |f: Option<u16>| -> usize {
        o.delivered
            .iter()
            .filter(|(s, t)| window(*t) && f.is_none_or(|f| arr[*s as usize].flow == f))
            .map(|(s, _)| arr[*s as usize].len)
            .sum()
    };
    bytes(Some(flow)) as f64 / bytes(None) as f64
}

#[test]
fn fq_codel_shares_the_link_equally_and_serves_sparse_flows_first() {
    let (o, arr) = mixed("fq_codel");
    let (a, b) = (share(&o, &arr, 0), share(&o, &arr, 1));
    assert!((a - b).abs() < 0.05, "shares {a:.3} / {b:.3}");
    let sparse: Vec<u64> = o
        .delivered
        .iter()
        .filter(|(s, _)| arr[*s as usize].flow == 2)
        .map(|(s, t)| t.nanos_since(arr[*s as usize].at))
        .collect();
    assert_eq!(sparse.len(), 300, "the sparse flow loses nothing");
    assert!(
        quantile(&sparse, 0.99) < 3 * NS_PER_MS,
        "sparse flow p99 {}",
        quantile(&sparse, 0.99)
    );
    // Drop-tail shares by what is offered (2:1), and the sparse flow waits
    // behind the standing queue.
    let (t, arr) = mixed("drop_tail");
    let (a, b) = (share(&t, &arr, 0), share(&t, &arr, 1));
    assert!(a > 1.6 * b, "drop-tail shares {a:.3} / {b:.3}");
}
