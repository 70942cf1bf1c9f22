//! Virtual-time harness: drives a [`Pipeline`] with synthetic packets.
#![allow(dead_code)]

use linkem::config::DirectionConfig;
use linkem::packet::ProtoClass;
use linkem::pipeline::Pipeline;
use linkem::stats::DropCause;
use linkem::time::Time;
use serde_json::json;

/// Build a direction config from a JSON object (validated via the real parser).
pub fn dir(v: serde_json::Value) -> DirectionConfig {
    linkem::Config::from_value(&json!({ "downlink": v }))
        .expect("valid config")
        .downlink
}

/// A synthetic IPv4/UDP packet of `len` bytes carrying `seq` (ECN-capable,
/// ECT(0), so the AQMs can mark it).
pub fn packet(seq: u64, len: usize) -> Vec<u8> {
    flow_packet(seq, len, 0)
}

/// Like [`packet`], from UDP source port `1000 + flow`.
pub fn flow_packet(seq: u64, len: usize, flow: u16) -> Vec<u8> {
    let len = len.max(36);
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[1] = 0x02;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 71, 2, 10]);
    p[16..20].copy_from_slice(&[10, 71, 1, 10]);
    p[20..22].copy_from_slice(&(1000 + flow).to_be_bytes());
    p[22..24].copy_from_slice(&443u16.to_be_bytes());
    p[28..36].copy_from_slice(&seq.to_be_bytes());
    let c = linkem::ecn::ipv4_header_checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p
}

/// The sequence number a test packet carries (read from its payload,
/// which corruption in these tests does not reach in practice).
pub fn seq_of(p: &[u8]) -> u64 {
    u64::from_be_bytes(p[28..36].try_into().unwrap())
}

/// Make a test packet Not-ECT (fixing the header checksum).
pub fn clear_ect(p: &mut [u8]) {
    p[1] &= !3;
    let c = linkem::ecn::ipv4_header_checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Does the packet carry ECN CE?
pub fn is_ce(p: &[u8]) -> bool {
    p[1] & 3 == 3
}

/// One offered packet.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub at: Time,
    pub len: usize,
    /// Flow number (UDP source port 1000 + flow).
    pub flow: u16,
    /// ECN-capable (ECT(0)); otherwise Not-ECT.
    pub ect: bool,
}

impl Arrival {
    pub fn new(at: Time, len: usize) -> Arrival {
        Arrival {
            at,
            len,
            flow: 0,
            ect: true,
        }
    }
}

/// What happened in a run.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outcome {
    /// (seq, release time) in delivery order.
    pub delivered: Vec<(u64, Time)>,
    /// (seq, cause) of dropped packets.
    pub dropped: Vec<(u64, DropCause)>,
    pub arrivals: Vec<Time>,
    /// Sequence numbers delivered with ECN CE.
    pub marked: Vec<u64>,
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
    /// One-way delays (ns) of delivered packets, in delivery order.
    pub fn delays(&self, arrivals: &[Arrival]) -> Vec<u64> {
        self.delivered
            .iter()
            .map(|(s, t)| t.nanos_since(arrivals[*s as usize].at))
            .collect()
    }
}

/// Mean and standard deviation.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
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
    let collect = |pipe: &mut Pipeline, out: &mut Outcome, now: Time| {
        while let Some(p) = pipe.poll(now) {
            if is_ce(&p) {
                out.marked.push(seq_of(&p));
            }
            out.delivered.push((seq_of(&p), now));
        }
        while let Some((c, p)) = pipe.pop_drop() {
            out.dropped.push((seq_of(&p), c));
        }
    };
    loop {
        let next_arrival = arrivals.get(i).map(|a| a.at);
        let deadline = pipe.next_deadline();
        let now = match (next_arrival, deadline) {
            (None, None) => break,
            (Some(a), Some(d)) => a.min(d),
            (a, d) => a.or(d).unwrap(),
        };
        if deadline.is_some_and(|d| d <= now) {
            collect(pipe, &mut out, now);
        }
        if next_arrival == Some(now) {
            hook(pipe, i, now);
            let a = arrivals[i];
            out.arrivals.push(now);
            let mut p = flow_packet(i as u64, a.len, a.flow);
            if !a.ect {
                clear_ect(&mut p);
            }
            pipe.push(p, ProtoClass::Udp, now);
            // Unshaped packets may be due at once.
            collect(pipe, &mut out, now);
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
        .map(|i| Arrival::new(start.plus_nanos(gap_ns * i as u64), len))
        .collect()
}

/// A bulk sender with TCP Reno-like congestion control (slow start, then
/// +1 packet per window, halving at most once per RTT on a loss or a CE
/// mark), closed over a pipeline: data goes through `pipe`, ACKs come back
/// after a constant `ack_delay`. Returns, per delivered packet, (arrival at
/// the link, delivery time, CE mark).
pub fn aimd_run(pipe: &mut Pipeline, ack_delay_ns: u64, secs: u64, len: usize) -> AimdOutcome {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let end = Time::from_secs(secs);
    let mut now = Time::ZERO;
    let (mut cwnd, mut ssthresh) = (2.0f64, f64::MAX);
    let mut in_flight = 0usize;
    let mut seq = 0u64;
    let mut sent_at: Vec<Time> = Vec::new();
    let mut out = AimdOutcome::default();
    // (time, kind, seq): kind 0 = ACK of seq (1 = with CE), 2 = loss noticed.
    let mut events: BinaryHeap<Reverse<(Time, u8, u64)>> = BinaryHeap::new();
    let mut recover_until = Time::ZERO;
    let mut backoff = |cwnd: &mut f64, ssthresh: &mut f64, now: Time, rtt: u64| {
        if now >= recover_until {
            *ssthresh = (*cwnd / 2.0).max(2.0);
            *cwnd = *ssthresh;
            recover_until = now.plus_nanos(rtt);
        }
    };
    while now < end {
        while (in_flight as f64) < cwnd.floor() {
            sent_at.push(now);
            pipe.push(flow_packet(seq, len, 0), ProtoClass::Tcp, now);
            seq += 1;
            in_flight += 1;
        }
        while let Some(p) = pipe.poll(now) {
            let s = seq_of(&p);
            let ce = is_ce(&p);
            out.delivered.push((sent_at[s as usize], now, ce));
            events.push(Reverse((now.plus_nanos(ack_delay_ns), u8::from(ce), s)));
        }
        while let Some((_, p)) = pipe.pop_drop() {
            out.drops += 1;
            // Noticed about one RTT later (duplicate ACKs).
            events.push(Reverse((now.plus_nanos(2 * ack_delay_ns), 2, seq_of(&p))));
        }
        let rtt = 2 * ack_delay_ns;
        while let Some(&Reverse((t, kind, _))) = events.peek() {
            if t > now {
                break;
            }
            events.pop();
            in_flight -= 1;
            match kind {
                0 => {
                    if cwnd < ssthresh {
                        cwnd += 1.0;
                    } else {
                        cwnd += 1.0 / cwnd;
                    }
                }
                1 => backoff(&mut cwnd, &mut ssthresh, now, rtt),
                _ => backoff(&mut cwnd, &mut ssthresh, now, rtt),
            }
        }
        if (in_flight as f64) < cwnd.floor() {
            continue;
        }
        let next = [pipe.next_deadline(), events.peek().map(|e| e.0 .0)]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if t > now => now = t,
            Some(_) => now = now.plus_nanos(1),
            None => break,
        }
    }
    out
}

/// What [`aimd_run`] saw.
#[derive(Debug, Default)]
pub struct AimdOutcome {
    /// (sent, delivered, CE) per delivered packet.
    pub delivered: Vec<(Time, Time, bool)>,
    pub drops: usize,
}

impl AimdOutcome {
    /// Delivered packets sent at or after `from`: their one-way times (ns).
    pub fn one_way_after(&self, from: Time) -> Vec<u64> {
        self.delivered
            .iter()
            .filter(|d| d.0 >= from)
            .map(|d| d.1.nanos_since(d.0))
            .collect()
    }
    /// Delivered bytes per second between `from` and `to` (by delivery time).
    pub fn goodput_bps(&self, from: Time, to: Time, len: usize) -> f64 {
        let n = self
            .delivered
            .iter()
            .filter(|d| d.1 >= from && d.1 < to)
            .count();
        n as f64 * len as f64 * 8.0 / to.nanos_since(from) as f64 * 1e9
    }
    pub fn marks(&self) -> usize {
        self.delivered.iter().filter(|d| d.2).count()
    }
}

/// The `q`-quantile of `xs`.
pub fn quantile(xs: &[u64], q: f64) -> u64 {
    let mut v = xs.to_vec();
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize]
}
