//! Property tests: determinism, seed sensitivity, classifier robustness,
//! config JSON round trip.

mod common;

use common::*;
use linkem::config::{Config, DirectionConfig, JitterDist, LossConfig, OutageConfig, RateSchedule};
use linkem::packet::classify;
use linkem::time::Time;
use proptest::prelude::*;
use serde_json::json;

fn arrivals(gaps: &[(u32, u16)]) -> Vec<Arrival> {
    let mut t = Time::ZERO;
    gaps.iter()
        .map(|&(gap, len)| {
            t = t.plus_nanos(u64::from(gap));
            Arrival {
                at: t,
                len: usize::from(len).clamp(40, 1500),
            }
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
    (
        (
            prop::option::of(1u64..=1_000_000_000_000),
            0u64..=60_000_000,
            0u64..=60_000_000,
            prop::sample::select(vec![
                JitterDist::Uniform,
                JitterDist::Normal,
                JitterDist::Pareto,
                JitterDist::Paretonormal,
            ]),
            any::<bool>(),
        ),
        (
            loss(),
            prop::option::of(1u32..),
            prop::option::of(1u64..),
            prop::option::of(outages),
            prop::option::of(schedule),
            prop::option::of(trace),
        ),
    )
        .prop_map(
            |(
                (rate_bps, delay_us, jitter_us, jitter_dist, reorder),
                (loss, queue_limit_packets, queue_limit_bytes, outages, rate_schedule, trace_ms),
            )| {
                DirectionConfig {
                    rate_bps,
                    delay_us,
                    jitter_us,
                    jitter_dist,
                    reorder,
                    loss,
                    queue_limit_packets,
                    queue_limit_bytes,
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
    fn config_json_round_trips(seed in any::<u64>(), downlink in direction(), uplink in direction()) {
        let c = Config { seed, downlink, uplink };
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
        pipe.reconfigure(&cfg, seed, later);
        let shifted: Vec<Arrival> = arr.iter().map(|a| Arrival { at: a.at.plus_nanos(later.as_nanos()), len: a.len }).collect();
        let replay = run_with(&mut pipe, &shifted, |_, _, _| {});
        let drops = |o: &Outcome| o.dropped.iter().map(|(s, c)| (*s, *c)).collect::<Vec<_>>();
        prop_assert_eq!(drops(&fresh), drops(&replay));
        let delays = |o: &Outcome, t0: u64| o.delivered.iter().map(|(s, t)| (*s, t.as_nanos() - t0)).collect::<Vec<_>>();
        prop_assert_eq!(delays(&fresh, 0), delays(&replay, later.as_nanos()));
    }
}
