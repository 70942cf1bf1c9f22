//! Delay line: base delay plus jitter, order-keeping or reordering.
//!
//! Each packet's extra delay is sampled when it arrives (netem-like):
//! `d = max(0, delay + jitter * X)` with X drawn from the configured
//! distribution. When it leaves the serializer at `departure`, its release
//! time is `departure + d`; with `reorder = false` it is raised to the
//! previous release in this direction so order is kept. The line is a
//! min-heap by (release, sequence) so equal release times stay FIFO.

use crate::config::{DirectionConfig, JitterDist};
use crate::packet::ProtoClass;
use crate::rng::Rng;
use crate::time::{Time, NS_PER_US};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Delay parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelayParams {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    pub dist: JitterDist,
    pub reorder: bool,
}

impl DelayParams {
    pub fn from_config(cfg: &DirectionConfig) -> DelayParams {
        DelayParams {
            delay_ns: cfg.delay_us.saturating_mul(NS_PER_US),
            jitter_ns: cfg.jitter_us.saturating_mul(NS_PER_US),
            dist: cfg.jitter_dist,
            reorder: cfg.reorder,
        }
    }

    /// One packet's delay in ns (never negative).
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        if self.jitter_ns == 0 {
            return self.delay_ns;
        }
        let x = match self.dist {
            JitterDist::Uniform => rng.uniform_sym(),
            JitterDist::Normal => rng.normal(),
            JitterDist::Pareto => rng.netem_pareto(),
            JitterDist::Paretonormal => rng.netem_paretonormal(),
        };
        let d = self.delay_ns as f64 + self.jitter_ns as f64 * x;
        if d <= 0.0 {
            0
        } else {
            d.round() as u64
        }
    }
}

/// A packet in the delay line.
#[derive(Debug)]
pub struct Delayed {
    pub release: Time,
    pub seq: u64,
    pub proto: ProtoClass,
    pub pkt: Vec<u8>,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Self) -> bool {
        (self.release, self.seq) == (other.release, other.seq)
    }
}
impl Eq for Delayed {}
impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Delayed {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.release, self.seq).cmp(&(other.release, other.seq))
    }
}

/// The delay stage.
#[derive(Debug, Default)]
pub struct DelayLine {
    heap: BinaryHeap<Reverse<Delayed>>,
    seq: u64,
    last_release: Time,
    reorder: bool,
}

impl DelayLine {
    pub fn new(reorder: bool) -> DelayLine {
        DelayLine {
            reorder,
            ..DelayLine::default()
        }
    }

    /// Switch mode; packets already in the line keep their release times.
    pub fn set_reorder(&mut self, reorder: bool) {
        self.reorder = reorder;
    }

    /// Release time a packet leaving the serializer at `departure` with
    /// sampled delay `delay_ns` would get.
    pub fn release_time(&self, departure: Time, delay_ns: u64) -> Time {
        let own = departure.plus_nanos(delay_ns);
        if self.reorder {
            own
        } else {
            own.max(self.last_release)
        }
    }

    pub fn insert(&mut self, departure: Time, delay_ns: u64, proto: ProtoClass, pkt: Vec<u8>) {
        let release = self.release_time(departure, delay_ns);
        self.last_release = self.last_release.max(release);
        self.seq += 1;
        self.heap.push(Reverse(Delayed {
            release,
            seq: self.seq,
            proto,
            pkt,
        }));
    }

    pub fn next_release(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse(d)| d.release)
    }

    /// The earliest packet with release <= now.
    pub fn pop_due(&mut self, now: Time) -> Option<Delayed> {
        if self.next_release()? <= now {
            self.heap.pop().map(|Reverse(d)| d)
        } else {
            None
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_keeping_vs_reorder() {
        let mut l = DelayLine::new(false);
        l.insert(Time(0), 100, ProtoClass::Udp, vec![1]);
        l.insert(Time(10), 5, ProtoClass::Udp, vec![2]);
        assert_eq!(l.pop_due(Time(99)).map(|d| d.pkt), None);
        assert_eq!(l.pop_due(Time(100)).map(|d| d.pkt), Some(vec![1]));
        assert_eq!(l.pop_due(Time(100)).map(|d| d.pkt), Some(vec![2]));
        let mut r = DelayLine::new(true);
        r.insert(Time(0), 100, ProtoClass::Udp, vec![1]);
        r.insert(Time(10), 5, ProtoClass::Udp, vec![2]);
        assert_eq!(r.pop_due(Time(100)).map(|d| d.pkt), Some(vec![2]));
        assert_eq!(r.pop_due(Time(100)).map(|d| d.pkt), Some(vec![1]));
    }

    #[test]
    fn sample_bounds() {
        let p = DelayParams {
            delay_ns: 1000,
            jitter_ns: 2000,
            dist: JitterDist::Uniform,
            reorder: false,
        };
        let mut rng = Rng::new(3);
        for _ in 0..1000 {
            assert!(p.sample(&mut rng) <= 3000);
        }
        let n = DelayParams {
            dist: JitterDist::Normal,
            ..p
        };
        assert!((0..1000).any(|_| n.sample(&mut rng) == 0));
    }
}
