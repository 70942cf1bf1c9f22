//! Virtual-time harness: drives a [`Pipeline`] with synthetic packets.
#![allow(dead_code)]

use linkem::config::DirectionConfig;
use linkem::packet::ProtoClass;
use linkem::pipeline::{Pipeline, Verdict};
use linkem::stats::DropCause;
use linkem::time::Time;
use serde_json::json;

/// Build a direction config from a JSON object (validated via the real parser).
pub fn dir(v: serde_json::Value) -> DirectionConfig {
    linkem::Config::from_value(&json!({ "downlink": v }))
        .expect("valid config")
        .downlink
}

/// A synthetic IPv4/UDP packet of `len` bytes carrying `seq`.
pub fn packet(seq: u64, len: usize) -> Vec<u8> {
    let len = len.max(36);
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[9] = 17;
    p[16..20].copy_from_slice(&[10, 71, 1, 10]);
    p[28..36].copy_from_slice(&seq.to_be_bytes());
    p
}

pub fn seq_of(p: &[u8]) -> u64 {
    u64::from_be_bytes(p[28..36].try_into().unwrap())
}

/// One offered packet.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub at: Time,
    pub len: usize,
}

/// What happened in a run.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outcome {
    /// (seq, release time) in delivery order.
    pub delivered: Vec<(u64, Time)>,
    /// (seq, cause) of dropped packets.
    pub dropped: Vec<(u64, DropCause)>,
    pub arrivals: Vec<Time>,
}

impl Outcome {
    pub fn delivered_bytes_by(&self, t: Time, lens: &[usize]) -> u64 {
        self.delivered
            .iter()
            .filter(|(_, at)| *at <= t)
            .map(|(s, _)| lens[*s as usize] as u64)
            .sum()
    }
    pub fn drops_of(&self, c: DropCause) -> usize {
        self.dropped.iter().filter(|(_, d)| *d == c).count()
    }
}

/// Run `arrivals` (sorted by time) through `pipe`, then drain it.
/// `hook(pipe, i, now)` runs before pushing arrival `i` (for reconfiguration).
pub fn run_with(
    pipe: &mut Pipeline,
    arrivals: &[Arrival],
    mut hook: impl FnMut(&mut Pipeline, usize, Time),
) -> Outcome {
    let mut out = Outcome::default();
    let mut i = 0;
    loop {
        let next_arrival = arrivals.get(i).map(|a| a.at);
        let deadline = pipe.next_deadline();
        let now = match (next_arrival, deadline) {
            (None, None) => break,
            (Some(a), Some(d)) => a.min(d),
            (a, d) => a.or(d).unwrap(),
        };
        if deadline.is_some_and(|d| d <= now) {
            while let Some(p) = pipe.poll(now) {
                out.delivered.push((seq_of(&p), now));
            }
        }
        if next_arrival == Some(now) {
            hook(pipe, i, now);
            let a = arrivals[i];
            out.arrivals.push(now);
            if let Verdict::Dropped(c, p) = pipe.push(packet(i as u64, a.len), ProtoClass::Udp, now)
            {
                out.dropped.push((seq_of(&p), c));
            }
            // Unshaped packets may be due at once.
            while let Some(p) = pipe.poll(now) {
                out.delivered.push((seq_of(&p), now));
            }
            i += 1;
        }
    }
    out
}

pub fn run(cfg: &DirectionConfig, seed: u64, arrivals: &[Arrival]) -> Outcome {
    let mut pipe = Pipeline::new(cfg, seed, 1, Time::ZERO);
    run_with(&mut pipe, arrivals, |_, _, _| {})
}

/// `n` packets of `len` bytes, one every `gap_ns`, starting at `start`.
pub fn periodic(n: usize, len: usize, gap_ns: u64, start: Time) -> Vec<Arrival> {
    (0..n)
        .map(|i| Arrival {
            at: start.plus_nanos(gap_ns * i as u64),
            len,
        })
        .collect()
}
