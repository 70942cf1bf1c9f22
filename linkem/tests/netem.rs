//! netem-parity stages in virtual time: duplication, corruption, reordering
//! with probability and gap, slots, overhead/mpu, loss after the link, ECN
//! marking on loss, and the Gilbert-Elliott chain across a change.

mod common;

use common::*;
use linkem::pipeline::Pipeline;
use linkem::stats::DropCause;
use linkem::time::{Time, NS_PER_MS, NS_PER_US};
use serde_json::json;

/// |k - n p| within 3.29 standard deviations (the 99.9 % binomial interval).
fn binomial_ok(n: usize, p: f64, k: usize) -> bool {
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    (k as f64 - n as f64 * p).abs() <= 3.29 * sd
}

#[test]
fn duplication_rate_and_every_copy_delivered() {
    let n = 20_000;
    let cfg = dir(json!({"duplicate": 0.05, "delay_us": 1_000}));
    let arr = periodic(n, 200, 100 * NS_PER_US, Time::ZERO);
    let mut pipe = Pipeline::new(&cfg, 3, 1, Time::ZERO);
    let out = run_with(&mut pipe, &arr, |_, _, _| {});
    let dups = pipe.counters().duplicated as usize;
    assert!(binomial_ok(n, 0.05, dups), "{dups} duplicates of {n}");
    assert_eq!(out.delivered.len(), n + dups);
    let mut seen = vec![0u8; n];
    for (s, _) in &out.delivered {
        seen[*s as usize] += 1;
    }
    assert_eq!(seen.iter().filter(|&&c| c == 2).count(), dups);
    assert!(seen.iter().all(|&c| c >= 1));
}

#[test]
fn duplication_and_loss_combine_as_in_netem() {
    // netem: a duplicate is made only if the loss event spares one of the two
    // copies; the copy then meets the loss again on its own.
    let (p, q, n) = (0.2, 0.3, 50_000);
    let cfg = dir(json!({"duplicate": q, "loss": {"model": "bernoulli", "p": p}}));
    let out = run(&cfg, 5, &periodic(n, 200, 10 * NS_PER_US, Time::ZERO));
    let per_packet = (1.0 - q) * (1.0 - p) + q * p + q * (1.0 - p) * (2.0 - p);
    let got = out.delivered.len() as f64 / n as f64;
    assert!(
        (got - per_packet).abs() < 0.01,
        "{got} copies per packet, netem gives {per_packet}"
    );
}

#[test]
fn corruption_rate_one_bit_past_the_header() {
    let n = 20_000;
    let cfg = dir(json!({"corrupt": 0.02}));
    let arr = periodic(n, 400, 100 * NS_PER_US, Time::ZERO);
    let mut pipe = Pipeline::new(&cfg, 9, 1, Time::ZERO);
    let mut changed = 0;
    for (i, a) in arr.iter().enumerate() {
        let p = flow_packet(i as u64, a.len, 0);
        pipe.push(p.clone(), linkem::packet::ProtoClass::Udp, a.at);
        let got = pipe.poll(a.at).expect("unshaped: delivered at once");
        let bits: u32 = got.iter().zip(&p).map(|(x, y)| (x ^ y).count_ones()).sum();
        assert!(bits <= 1);
        assert_eq!(got[..20], p[..20], "the IP header is never touched");
        changed += bits as usize;
    }
    let counted = pipe.counters().corrupted as usize;
    assert_eq!(changed, counted);
    assert!(binomial_ok(n, 0.02, counted), "{counted} corrupted of {n}");
}

#[test]
fn reorder_with_probability_and_gap() {
    // netem `delay 10ms reorder 25% gap 5`: after a reordered packet, 4 are
    // delayed normally, then each goes at once with probability 25 %.
    let n = 40_000;
    let cfg = dir(json!({"delay_us": 10_000, "reorder_prob": 0.25, "reorder_gap": 5}));
    let arr = periodic(n, 200, NS_PER_MS, Time::ZERO);
    let out = run(&cfg, 2, &arr);
    let d = {
        let mut d = vec![0u64; n];
        for (s, t) in &out.delivered {
            d[*s as usize] = t.nanos_since(arr[*s as usize].at);
        }
        d
    };
    assert!(d.iter().all(|&x| x == 0 || x == 10 * NS_PER_MS));
    let picked: Vec<usize> = (0..n).filter(|&i| d[i] == 0).collect();
    assert!(picked.windows(2).all(|w| w[1] - w[0] >= 5), "gap kept");
    // Mean cycle: 4 + 1/0.25 = 8 packets.
    let frac = picked.len() as f64 / n as f64;
    assert!((frac - 0.125).abs() < 0.01, "{frac} reordered");
    // They overtake the delayed ones.
    assert!(out.delivered.windows(2).any(|w| w[1].0 < w[0].0));
}

#[test]
fn slots_release_in_bursts_with_budgets() {
    // 5 ms slots, at most 3 packets each; 1 packet every ms.
    let cfg = dir(json!({"slot": {"delay_us": 5_000, "packets": 3}}));
    let arr = periodic(3_000, 200, NS_PER_MS, Time::from_micros(1));
    let out = run(&cfg, 1, &arr);
    assert_eq!(out.delivered.len(), 3_000);
    let mut per_instant = std::collections::BTreeMap::<u64, usize>::new();
    for (_, t) in &out.delivered {
        assert_eq!(
            t.as_nanos() % (5 * NS_PER_MS),
            0,
            "released off a slot: {t}"
        );
        *per_instant.entry(t.as_nanos()).or_default() += 1;
    }
    assert!(per_instant.values().all(|&c| c <= 3));
    // 5 packets arrive per slot but only 3 leave: a backlog builds up.
    assert!(out.delivered.last().unwrap().1 > Time::from_secs(4));
    assert!(out.delivered.windows(2).all(|w| w[0].0 < w[1].0), "FIFO");
}

#[test]
fn overhead_and_mpu_count_against_the_rate() {
    // 12 Mbit/s: 1500 bytes on the link take 1 ms.
    for (json, len) in [
        (json!({"rate_bps": 12_000_000, "mpu_bytes": 1500}), 100),
        (json!({"rate_bps": 12_000_000, "overhead_bytes": 100}), 1400),
    ] {
        let out = run(&dir(json.clone()), 1, &periodic(10, len, 0, Time::ZERO));
        let times: Vec<u64> = out
            .delivered
            .iter()
            .map(|d| d.1.as_nanos() / NS_PER_MS)
            .collect();
        assert_eq!(times, (1..=10).collect::<Vec<_>>(), "{json}");
    }
}

#[test]
fn loss_after_the_link_wastes_link_time() {
    // Offered 2x 12 Mbit/s for 5 s. Loss before the link: the survivors fill
    // it (1000 packets/s). Loss after the link: the lost ones used it too.
    let arr = periodic(10_000, 1500, 500 * NS_PER_US, Time::ZERO);
    let by_5s = |o: &Outcome| {
        o.delivered
            .iter()
            .filter(|d| d.1 <= Time::from_secs(5))
            .count()
    };
    let before = run(
        &dir(json!({"rate_bps": 12_000_000, "loss": {"model": "bernoulli", "p": 0.5}})),
        1,
        &arr,
    );
    let after = run(
        &dir(json!({"rate_bps": 12_000_000, "loss_after": {"model": "bernoulli", "p": 0.5}})),
        1,
        &arr,
    );
    assert!(
        (4_900..=5_000).contains(&by_5s(&before)),
        "{}",
        by_5s(&before)
    );
    assert!(
        (2_300..=2_700).contains(&by_5s(&after)),
        "{}",
        by_5s(&after)
    );
    assert!(after.drops_of(DropCause::LossAfter) > 2_000);
}

#[test]
fn loss_ecn_marks_ect_packets_and_drops_the_others() {
    let cfg = dir(json!({"loss": {"model": "bernoulli", "p": 1.0}, "loss_ecn": true}));
    let mut arr = periodic(100, 200, NS_PER_MS, Time::ZERO);
    for a in arr.iter_mut().skip(50) {
        a.ect = false;
    }
    let out = run(&cfg, 1, &arr);
    assert_eq!(out.marked, (0..50).collect::<Vec<_>>());
    assert_eq!(out.drops_of(DropCause::Loss), 50);
}

#[test]
fn gilbert_elliott_state_survives_a_change_only_with_keep_state() {
    // p = 1: the first packet is delivered (good state), the chain then
    // stays bad (r = 0) and loses everything.
    let ge = |p: f64| dir(json!({"loss": {"model": "gilbert_elliott", "p": p, "r": 0.0}}));
    for (keep, lost_after_change) in [(true, true), (false, false)] {
        let mut pipe = Pipeline::new(&ge(1.0), 1, 1, Time::ZERO);
        let out = run_with(
            &mut pipe,
            &periodic(2, 200, NS_PER_MS, Time::ZERO),
            |_, _, _| {},
        );
        assert_eq!((out.delivered.len(), out.dropped.len()), (1, 1));
        pipe.reconfigure(&ge(0.5), 0, 1, keep, Time::from_millis(5));
        let out = run_with(
            &mut pipe,
            &periodic(1, 200, 0, Time::from_millis(6)),
            |_, _, _| {},
        );
        assert_eq!(
            out.dropped.len() == 1,
            lost_after_change,
            "keep_state {keep}"
        );
    }
}
