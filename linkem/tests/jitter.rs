//! The delay process in virtual time: with order kept, the delivered one-way
//! delays have the configured mean and spread whatever the packet rate.

mod common;

use common::*;
use linkem::time::{Time, NS_PER_MS, NS_PER_SEC};
use serde_json::json;

/// Delivered delays (ms) of packets every `gap_ns` for `secs` seconds.
fn delays(dist: &str, reorder: bool, gap_ns: u64, secs: u64, seed: u64) -> Vec<f64> {
    let cfg = dir(
        json!({"delay_us": 20_000, "jitter_us": 5_000, "jitter_dist": dist, "reorder": reorder}),
    );
    let arr = periodic(
        (secs * NS_PER_SEC / gap_ns) as usize,
        100,
        gap_ns,
        Time::ZERO,
    );
    let out = run(&cfg, seed, &arr);
    assert_eq!(out.delivered.len(), arr.len());
    if !reorder {
        assert!(
            out.delivered.windows(2).all(|w| w[0].0 < w[1].0),
            "order kept"
        );
    }
    out.delays(&arr).iter().map(|&d| d as f64 / 1e6).collect()
}

/// (distribution, tolerance of the mean). Pareto's tail is heavy (even cut
/// at 4 jitters, its sample standard deviation converges slowly), so the
/// spread is checked by the interquartile range, which is robust, and by the
/// standard deviation only for uniform and normal.
const CASES: [(&str, f64); 4] = [
    ("uniform", 0.015),
    ("normal", 0.015),
    ("paretonormal", 0.03),
    ("pareto", 0.03),
];

fn iqr(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() * 3 / 4] - v[v.len() / 4]
}

#[test]
fn order_kept_mean_and_spread_do_not_depend_on_the_packet_rate() {
    for (dist, tol) in CASES {
        // The configured distribution: independent samples per packet.
        let reference = delays(dist, true, NS_PER_MS, 100, 99);
        let (_, want_sd) = mean_sd(&reference);
        let want_iqr = iqr(&reference);
        // One packet per ms for 100 s, and 1 Gbit/s spacing of 1500-byte
        // packets (12 us) for 30 s: the same realization of the process
        // (same seed), seen at two packet rates.
        let sparse = delays(dist, false, NS_PER_MS, 100, 7);
        let dense = delays(dist, false, 12_000, 30, 7);
        let (m1_30, _) = mean_sd(&sparse[..30_000]);
        let (m2, _) = mean_sd(&dense);
        assert!(
            (m1_30 - m2).abs() < 0.1,
            "{dist}: the same 30 s at 1 ms and 12 us spacing: {m1_30:.3} vs {m2:.3} ms"
        );
        for (what, d) in [("1 ms", &sparse), ("12 us", &dense)] {
            let (m, s) = mean_sd(d);
            assert!(
                (m - 20.0).abs() < 20.0 * tol,
                "{dist} at {what}: mean {m:.3} ms, configured 20"
            );
            let r = iqr(d) / want_iqr;
            eprintln!("{dist} at {what}: mean {m:.3} IQR ratio {r:.3} sd {s:.3} (per packet {want_sd:.3})");
            assert!(
                (0.93..=1.05).contains(&r),
                "{dist} at {what}: IQR ratio {r:.3}"
            );
            if matches!(dist, "uniform" | "normal") {
                let r = s / want_sd;
                assert!(
                    (0.94..=1.02).contains(&r),
                    "{dist} at {what}: sd ratio {r:.3}"
                );
            }
        }
    }
}

#[test]
fn per_packet_jitter_with_reorder_has_the_configured_distribution() {
    // reorder = true: netem without a rate, an independent sample per packet.
    for (dist, sd_x) in [("uniform", 0.577_35), ("normal", 1.0)] {
        let d = delays(dist, true, NS_PER_MS, 50, 3);
        let (m, s) = mean_sd(&d);
        assert!((m - 20.0).abs() < 0.1, "{dist}: mean {m}");
        assert!((s - 5.0 * sd_x).abs() < 0.1, "{dist}: sd {s}");
    }
}

#[test]
fn uniform_delays_stay_within_the_configured_bounds() {
    for gap in [NS_PER_MS, 12_000] {
        let d = delays("uniform", false, gap, 10, 11);
        let (lo, hi) = d
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        assert!(lo >= 15.0 && hi <= 25.0, "{lo}..{hi}");
        assert!(
            lo < 15.5 && hi > 24.5,
            "the whole range is used: {lo}..{hi}"
        );
    }
}

#[test]
fn values_change_on_the_interval_grid() {
    // Uniform 20 +- 5 ms, a new value every 25 ms (the default, 5 x jitter):
    // rises happen exactly on the grid; falls are ramps of slope -1 (release
    // times constant) centred on it.
    let cfg = dir(json!({"delay_us": 20_000, "jitter_us": 5_000}));
    let arr = periodic(1_000_000, 100, 10_000, Time::ZERO);
    let out = run(&cfg, 5, &arr);
    let d = out.delays(&arr);
    let mut rises = 0;
    for i in 1..d.len() {
        let t = arr[i].at.as_nanos();
        if d[i] > d[i - 1] {
            assert_eq!(t % 25_000_000, 0, "a rise off the grid at {t} ns");
            rises += 1;
        } else if d[i] < d[i - 1] {
            // Falls are ramps: the delay falls no faster than time passes.
            assert!(
                d[i - 1] - d[i] <= 10_000,
                "a fall that is not a ramp at {t} ns"
            );
        }
    }
    // 400 grid instants in 10 s; about half are rises.
    assert!((150..=250).contains(&rises), "{rises}");
}

#[test]
fn path_delay_is_subtracted() {
    let cfg = dir(json!({"delay_us": 5_000, "path_delay_us": 300}));
    let arr = periodic(10, 100, NS_PER_MS, Time::ZERO);
    let out = run(&cfg, 1, &arr);
    assert!(out.delays(&arr).iter().all(|&d| d == 4_700_000));
}
