//! Property tests: determinism, seed sensitivity, classifier robustness,
//! config JSON round trip.

mod common;

use common::*;
use linkem::config::{
    Config, DirectionConfig, JitterDist, LossConfig, OutageConfig, QdiscConfig, RateSchedule,
    SlotConfig,
};
use linkem::packet::classify;
use linkem::time::Time;
use proptest::prelude::*;
use serde_json::json;

fn arrivals(gaps: &[(u32, u16)]) -> Vec<Arrival> {
    let mut t = Time::ZERO;
    gaps.iter()
        .map(|&(gap, len)| {
            t = t.plus_nanos(u64::from(gap));
            Arrival::new(t, usize::from(len).clamp(40, 1500))
        })
        .collect()
}

fn lossy() -> DirectionConfig {
    dir(
        json!({"rate_bps": 50_000_000, "delay_us": 5_000, "jitter_us": 2_000,
               "jitter_dist": "normal", "reorder": true,
               "loss": {"model": "bernoulli", "p": 0.05}, "queue_limit_packets": 50}),
    )
}

fn drop_positions(o: &Outcome) -> Vec<u64> {
    o.dropped.iter().map(|d| d.0).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn same_seed_same_outcome(seed in any::<u64>(), gaps in prop::collection::vec((0u32..400_000, 40u16..1500), 1..600)) {
        let arr = arrivals(&gaps);
        let a = run(&lossy(), seed, &arr);
        let b = run(&lossy(), seed, &arr);
        prop_assert_eq!(a, b);
    }

    #[test]
    fn different_seeds_different_drops(seed in any::<u64>()) {
        let arr = periodic(2000, 500, 1_000_000, Time::ZERO);
        let a = run(&lossy(), seed, &arr);
        let b = run(&lossy(), seed.wrapping_add(1), &arr);
        prop_assert_ne!(drop_positions(&a), drop_positions(&b));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn classifier_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = classify(&bytes);
    }

    #[test]
    fn classifier_never_panics_on_ip_like(first in prop::sample::select(vec![0x45u8, 0x46, 0x4f, 0x60, 0x6f]),
                                          rest in prop::collection::vec(any::<u8>(), 0..120)) {
        let mut b = vec![first];
        b.extend(rest);
        if let Ok(m) = classify(&b) {
            prop_assert!(m.ip_len <= b.len());
            prop_assert_eq!(m.len, b.len());
        }
    }
}

fn prob() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(1.0), 0.0f64..=1.0]
}

fn loss() -> impl Strategy<Value = LossConfig> {
    prop_oneof![
        Just(LossConfig::None),
        prob().prop_map(|p| LossConfig::Bernoulli { p }),
        (prob(), prob(), prob(), prob()).prop_map(|(p, r, loss_good, loss_bad)| {
            LossConfig::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            }
        }),
    ]
}

fn direction() -> impl Strategy<Value = DirectionConfig> {
    let outages =
        (1u64..100_000, 0u64..=100, 0u64..100_000).prop_map(|(period_ms, pct, offset_ms)| {
            OutageConfig {
                period_ms,
                down_ms: period_ms * pct / 100,
                offset_ms,
            }
        });
    let schedule =
        prop::collection::btree_map(1u64..10_000, 0u64..1_000_000_000, 0..5).prop_map(|m| {
            let mut steps = vec![(0, 1_000_000)];
            steps.extend(m);
            RateSchedule {
                period_ms: 10_000,
                steps,
            }
        });
    let trace = prop::collection::vec(0u64..50, 1..50).prop_map(|gaps| {
        let mut t = 0;
        let mut v: Vec<u64> = gaps
            .iter()
            .map(|g| {
                t += g;
                t
            })
            .collect();
        if let Some(last) = v.last_mut() {
            *last += 1;
        }
        v
    });
    let qdisc = prop_oneof![
        Just(QdiscConfig::DropTail),
        Just(QdiscConfig::DropHead),
        (1u64..100_000, 1u64..1_000_000, any::<bool>()).prop_map(
            |(target_us, interval_us, ecn)| {
                QdiscConfig::Codel {
                    target_us,
                    interval_us,
                    ecn,
                }
            }
        ),
        (
            1u64..100_000,
            1u64..1_000_000,
            any::<bool>(),
            1u32..=65_536,
            256u32..=65_536
        )
            .prop_map(|(target_us, interval_us, ecn, flows, quantum)| {
                QdiscConfig::FqCodel {
                    target_us,
                    interval_us,
                    ecn,
                    flows,
                    quantum,
                }
            }),
        (1_000u64..100_000, 0.0f64..=2.0, any::<bool>()).prop_map(|(tupdate_us, alpha, ecn)| {
            QdiscConfig::Pie {
                target_us: 15_000,
                tupdate_us,
                alpha,
                beta: 1.25,
                max_burst_us: 150_000,
                ecn,
                bytemode: !ecn,
            }
        }),
    ];
    let slot = (
        1u64..1_000_000,
        0u64..1_000_000,
        prop::option::of(1u32..),
        prop::option::of(1u64..),
    )
        .prop_map(|(delay_us, jitter_us, packets, bytes)| SlotConfig {
            delay_us,
            jitter_us,
            dist: JitterDist::Normal,
            packets,
            bytes,
        });
    let dist = prop::sample::select(vec![
        JitterDist::Uniform,
        JitterDist::Normal,
        JitterDist::Pareto,
        JitterDist::Paretonormal,
    ]);
    (
        (
            prop::option::of(1u64..=1_000_000_000_000),
            1u64..=60_000_000,
            0u64..=60_000_000,
            0u64..=60_000_000,
            dist,
            prop::option::of(1u64..=60_000_000),
            any::<bool>(),
            (prob(), 1u32..),
        ),
        (
            loss(),
            loss(),
            any::<bool>(),
            prob(),
            prob(),
            prop::option::of(1u32..),
            prop::option::of(1u64..),
            qdisc,
        ),
        (
            -1500i32..=65_535,
            0u32..=65_535,
            prop::option::of(slot),
            prop::option::of(outages),
            prop::option::of(schedule),
            prop::option::of(trace),
        ),
    )
        .prop_map(
            |(
                (
                    rate_bps,
                    delay_us,
                    path_delay_us,
                    jitter_us,
                    jitter_dist,
                    jitter_interval_us,
                    reorder,
                    (reorder_prob, reorder_gap),
                ),
                (
                    loss,
                    loss_after,
                    loss_ecn,
                    duplicate,
                    corrupt,
                    queue_limit_packets,
                    queue_limit_bytes,
                    qdisc,
                ),
                (overhead_bytes, mpu_bytes, slot, outages, rate_schedule, trace_ms),
            )| {
                DirectionConfig {
                    rate_bps,
                    delay_us,
                    path_delay_us,
                    jitter_us,
                    jitter_dist,
                    jitter_interval_us,
                    reorder,
                    reorder_prob,
                    reorder_gap,
                    loss,
                    loss_after,
                    loss_ecn,
                    duplicate,
                    corrupt,
                    queue_limit_packets,
                    queue_limit_bytes,
                    qdisc,
                    overhead_bytes,
                    mpu_bytes,
                    slot,
                    outages,
                    rate_schedule,
                    trace_ms,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn config_json_round_trips(seed in any::<u64>(), keep_state in any::<bool>(), downlink in direction(), uplink in direction()) {
        let c = Config { seed, keep_state, downlink, uplink };
        prop_assert_eq!(c.validate(), Ok(()));
        let back = Config::from_json(&c.to_json());
        prop_assert_eq!(back, Ok(c.clone()));
        let pretty = serde_json::to_string_pretty(&c).unwrap();
        prop_assert_eq!(Config::from_json(&pretty), Ok(c));
    }
}

proptest! {
    /// Re-applying a configuration restarts the random streams from its seed: the packets after the
    /// re-application meet the same drops and delays as a fresh pipeline (what pairs runs in a sweep).
    #[test]
    fn reapplied_config_replays_the_same_outcome(seed in any::<u64>(), gaps in prop::collection::vec((1u32..2_000_000, 40u16..1500), 50..300)) {
        let cfg = lossy();
        let arr = arrivals(&gaps);
        let fresh = run(&cfg, seed, &arr);
        let mut pipe = linkem::pipeline::Pipeline::new(&cfg, seed, 1, Time::ZERO);
        // Warm the pipeline up with unrelated traffic, drain it, then re-apply the same config.
        let warm = run_with(&mut pipe, &arrivals(&[(1000, 500); 64]), |_, _, _| {});
        prop_assert!(!warm.arrivals.is_empty());
        let later = Time::from_millis(10_000);
        pipe.reconfigure(&cfg, 10_000, seed, false, later);
        let shifted: Vec<Arrival> = arr.iter().map(|a| Arrival::new(a.at.plus_nanos(later.as_nanos()), a.len)).collect();
        let replay = run_with(&mut pipe, &shifted, |_, _, _| {});
        let drops = |o: &Outcome| o.dropped.iter().map(|(s, c)| (*s, *c)).collect::<Vec<_>>();
        prop_assert_eq!(drops(&fresh), drops(&replay));
        let delays = |o: &Outcome, t0: u64| o.delivered.iter().map(|(s, t)| (*s, t.as_nanos() - t0)).collect::<Vec<_>>();
        prop_assert_eq!(delays(&fresh, 0), delays(&replay, later.as_nanos()));
    }
}

/// A random pipeline configuration that exercises every stage.
fn any_stage_config() -> impl Strategy<Value = DirectionConfig> {
    let qdisc = prop::sample::select(vec!["drop_tail", "drop_head", "codel", "fq_codel", "pie"]);
    (
        (prop::option::of(1_000_000u64..200_000_000), 0u64..20_000, 0u64..5_000, any::<bool>()),
        (0.0f64..0.2, 0.0f64..0.2, 0.0f64..0.1, 0.0f64..0.1, 0.0f64..0.3),
        (qdisc, prop::option::of(2u32..100), prop::option::of(3_000u64..200_000), any::<bool>()),
    )
        .prop_map(|((rate, delay, jitter, reorder), (loss, loss_after, dup, corrupt, rprob), (kind, qp, qb, slot))| {
            let mut j = json!({
                "rate_bps": rate, "delay_us": delay, "jitter_us": jitter, "reorder": reorder,
                "loss": {"model": "bernoulli", "p": loss},
                "loss_after": {"model": "gilbert_elliott", "p": loss_after, "r": 0.5},
                "duplicate": dup, "corrupt": corrupt,
                "queue_limit_packets": qp, "queue_limit_bytes": qb,
                "qdisc": {"kind": kind, "ecn": kind != "drop_tail" && kind != "drop_head" && reorder},
                "slot": if slot { json!({"delay_us": 700, "jitter_us": 300, "packets": 4}) } else { json!(null) },
                "outages": {"period_ms": 300, "down_ms": 20},
            });
            if delay > 0 {
                j["reorder_prob"] = json!(rprob);
            }
            if kind == "drop_tail" || kind == "drop_head" {
                j["qdisc"] = json!({"kind": kind});
            }
            dir(j)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Packets in (received + duplicated) = delivered + dropped (by cause)
    /// + in flight, at every step, whatever the stages do.
    #[test]
    fn packets_are_conserved(cfg in any_stage_config(), seed in any::<u64>(),
                             gaps in prop::collection::vec((0u32..300_000, 40u16..1500), 1..800)) {
        let arr = arrivals(&gaps);
        let mut pipe = linkem::pipeline::Pipeline::new(&cfg, seed, 1, Time::ZERO);
        let mut delivered = 0u64;
        let mut dropped = [0u64; linkem::stats::DROP_CAUSES];
        let check = |pipe: &linkem::pipeline::Pipeline, delivered: u64, dropped: &[u64]| {
            let c = pipe.counters();
            prop_assert_eq!(c.total_delivered(), delivered);
            prop_assert_eq!(&c.drops[..], dropped);
            prop_assert_eq!(
                c.total_received() + c.duplicated,
                delivered + dropped.iter().sum::<u64>() + pipe.in_flight() as u64
            );
            Ok(())
        };
        let mut i = 0;
        loop {
            let next = arr.get(i).map(|a| a.at);
            let now = match (next, pipe.next_deadline()) {
                (None, None) => break,
                (a, d) => a.into_iter().chain(d).min().unwrap(),
            };
            if next == Some(now) {
                pipe.push(packet(i as u64, arr[i].len), linkem::packet::ProtoClass::Udp, now);
                i += 1;
            }
            while pipe.poll(now).is_some() {
                delivered += 1;
            }
            while let Some((c, _)) = pipe.pop_drop() {
                dropped[c as usize] += 1;
            }
            check(&pipe, delivered, &dropped)?;
        }
        prop_assert_eq!(pipe.in_flight(), 0);
        prop_assert!(pipe.next_deadline().is_none());
    }

    /// With reordering off (no jitter reordering, no netem reordering) and a
    /// FIFO discipline, packets leave in the order they came.
    #[test]
    fn fifo_when_reordering_is_off(cfg in any_stage_config(), seed in any::<u64>(),
                                   gaps in prop::collection::vec((0u32..300_000, 40u16..1500), 1..800)) {
        let mut cfg = cfg;
        cfg.reorder = false;
        cfg.reorder_prob = 0.0;
        cfg.duplicate = 0.0;
        cfg.corrupt = 0.0; // it could flip a bit of the sequence number
        if matches!(cfg.qdisc, QdiscConfig::FqCodel { .. }) {
            cfg.qdisc = QdiscConfig::DropTail;
        }
        let out = run(&cfg, seed, &arrivals(&gaps));
        prop_assert!(out.delivered.windows(2).all(|w| w[0].0 < w[1].0), "{:?}", out.delivered);
    }

    /// With a constant rate and a constant delay, the bytes delivered in any
    /// window are at most rate x window + one packet: consecutive deliveries
    /// are at least one serialization time apart.
    #[test]
    fn delivery_never_beats_the_rate(rate in 1_000_000u64..1_000_000_000, delay in 0u64..50_000,
                                     overhead in -20i32..100, seed in any::<u64>(),
                                     gaps in prop::collection::vec((0u32..100_000, 40u16..1500), 2..800)) {
        let cfg = dir(json!({"rate_bps": rate, "delay_us": delay, "overhead_bytes": overhead,
                             "loss": {"model": "bernoulli", "p": 0.05}, "duplicate": 0.05,
                             "queue_limit_bytes": 100_000}));
        let arr = arrivals(&gaps);
        let out = run(&cfg, seed, &arr);
        for w in out.delivered.windows(2) {
            let len = cfg.wire_len(arr[w[1].0 as usize].len) as u64;
            let min_gap = linkem::time::serialization_nanos(len, rate);
            prop_assert!(w[1].1.nanos_since(w[0].1) >= min_gap, "{:?} {:?}", w[0], w[1]);
        }
        let total: u64 = out.delivered.iter().map(|(s, _)| cfg.wire_len(arr[*s as usize].len) as u64).sum();
        if let (Some(first), Some(last)) = (out.delivered.first(), out.delivered.last()) {
            let window = last.1.nanos_since(first.1) as f64 / 1e9;
            prop_assert!(total as f64 <= rate as f64 / 8.0 * window + 1500.0 + 100.0);
        }
    }
}
