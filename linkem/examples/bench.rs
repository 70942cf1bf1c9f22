//! Core throughput: `cargo run --release --example bench`.
//! Pushes 1500-byte packets through a `Link` in virtual time (no I/O) and
//! reports packets per second of CPU time.

use linkem::link::Link;
use linkem::{Config, Time};
use std::time::Instant;

fn bench(name: &str, json: &str) {
    let cfg = Config::from_json(json).expect("valid config");
    let mut link = Link::new(
        "10.71.1.0/24".parse().unwrap(),
        "10.71.2.0/24".parse().unwrap(),
        cfg,
        Time::ZERO,
    );
    let mut pkt = vec![0u8; 1500];
    pkt[0] = 0x45;
    pkt[2..4].copy_from_slice(&1500u16.to_be_bytes());
    pkt[9] = 17;
    pkt[16..20].copy_from_slice(&[10, 71, 1, 10]);
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let n = 2_000_000u64;
    let gap = 12_000; // 1 Gbit/s of 1500-byte packets
    let (mut out, t0) = (0u64, Instant::now());
    for i in 0..n {
        let now = Time(i * gap);
        let mut b = pool.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(&pkt);
        link.push(b, now);
        while let Some((_, _, b)) = link.pop_drop() {
            pool.push(b);
        }
        while let Some(p) = link.poll(now) {
            out += 1;
            pool.push(p);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{name}: {:.2} Mpps ({:.1} Gbit/s of 1500 B), delivered {out}/{n}",
        n as f64 / secs / 1e6,
        n as f64 * 12_000.0 / secs / 1e9
    );
}

fn main() {
    bench("unlimited", "{}");
    bench(
        "1 Gbit/s + 20 ms delay + 1 ms jitter + 1% loss",
        r#"{"downlink": {"rate_bps": 1000000000, "delay_us": 20000, "jitter_us": 1000,
            "loss": {"model": "bernoulli", "p": 0.01}}}"#,
    );
    bench(
        "1 Gbit/s + fq_codel + 20 ms delay",
        r#"{"downlink": {"rate_bps": 1000000000, "delay_us": 20000, "qdisc": {"kind": "fq_codel"}}}"#,
    );
}
