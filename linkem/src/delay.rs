//! The delay stage: base delay plus jitter, order-keeping or reordering.
//!
//! A packet leaving the link at `departure` is released at `departure + d`:
//!
//! * order kept (`reorder = false`): `d` is the value at `departure` of a
//!   delay process in time (`jitter.rs`), so the delivered delays do not
//!   depend on the packet rate; the release is also never earlier than the
//!   previous one (which matters only when a reconfiguration lowers the
//!   delay);
//! * `reorder = true`: `d = max(0, delay + jitter * X)` is drawn per packet
//!   (netem without a rate), so jitter reorders.
//!
//! A packet chosen by netem-style reordering (`reorder_prob`) skips the delay
//! and is released at its departure. The line is a min-heap by (release,
//! sequence) so equal release times stay FIFO. The delay added is
//! `delay_us - path_delay_us`: the lab's own path supplies the rest.

use crate::config::{DirectionConfig, JitterDist};
use crate::jitter::DelayProcess;
use crate::pkt::Pkt;
use crate::rng::Rng;
use crate::time::{Time, NS_PER_US};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Delay parameters of one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelayParams {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    pub dist: JitterDist,
}

impl DelayParams {
    /// The delay linkem adds (`delay_us - path_delay_us`) and the jitter.
    pub fn from_config(cfg: &DirectionConfig) -> DelayParams {
        DelayParams {
            delay_ns: cfg.added_delay_us().saturating_mul(NS_PER_US),
            jitter_ns: cfg.jitter_us.saturating_mul(NS_PER_US),
            dist: cfg.jitter_dist,
        }
    }

    /// One value `max(0, delay + jitter * X)` in ns.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        if self.jitter_ns == 0 {
            return self.delay_ns;
        }
        let x = rng.jitter(self.dist);
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
struct Delayed {
    release: Time,
    seq: u64,
    pkt: Pkt,
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

/// The delay stage of one direction.
#[derive(Debug)]
pub struct DelayStage {
    params: DelayParams,
    reorder: bool,
    process: DelayProcess,
    heap: BinaryHeap<Reverse<Delayed>>,
    seq: u64,
    last_release: Time,
}

impl DelayStage {
    pub fn new(cfg: &DirectionConfig, at: Time, rng: &mut Rng) -> DelayStage {
        let params = DelayParams::from_config(cfg);
        DelayStage {
            params,
            reorder: cfg.reorder,
            process: DelayProcess::new(params, cfg.jitter_interval_ns(), at, rng),
            heap: BinaryHeap::new(),
            seq: 0,
            last_release: Time::ZERO,
        }
    }

    /// New parameters from `at` on; packets in the line keep their release
    /// times, the delay process starts afresh at `at`.
    pub fn reconfigure(&mut self, cfg: &DirectionConfig, at: Time, rng: &mut Rng) {
        self.params = DelayParams::from_config(cfg);
        self.reorder = cfg.reorder;
        self.process = DelayProcess::new(self.params, cfg.jitter_interval_ns(), at, rng);
    }

    /// The release time of a packet leaving the link at `departure`
    /// (calls in departure order). `skip`: netem-style reordering.
    pub fn release_for(&mut self, departure: Time, skip: bool, rng: &mut Rng) -> Time {
        if skip {
            return departure;
        }
        if self.reorder {
            return departure.plus_nanos(self.params.sample(rng));
        }
        let own = departure.plus_nanos(self.process.delay_at(departure, rng));
        self.last_release = self.last_release.max(own);
        self.last_release
    }

    pub fn insert(&mut self, release: Time, pkt: Pkt) {
        self.seq += 1;
        self.heap.push(Reverse(Delayed {
            release,
            seq: self.seq,
            pkt,
        }));
    }

    pub fn next_release(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse(d)| d.release)
    }

    /// The earliest packet with release <= now, and its release time.
    pub fn pop_due(&mut self, now: Time) -> Option<(Time, Pkt)> {
        if self.next_release()? <= now {
            self.heap.pop().map(|Reverse(d)| (d.release, d.pkt))
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

    pub fn params(&self) -> &DelayParams {
        &self.params
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_bounds() {
        let p = DelayParams {
            delay_ns: 1000,
            jitter_ns: 2000,
            dist: JitterDist::Uniform,
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

    #[test]
    fn skipped_packets_leave_at_departure_and_equal_times_stay_fifo() {
        let cfg = DirectionConfig {
            delay_us: 100,
            ..DirectionConfig::default()
        };
        let mut rng = Rng::new(1);
        let mut s = DelayStage::new(&cfg, Time::ZERO, &mut rng);
        let a = s.release_for(Time(0), false, &mut rng);
        let b = s.release_for(Time(10), true, &mut rng);
        assert_eq!((a, b), (Time(100_000), Time(10)));
        for (i, r) in [(1u8, a), (2, b), (3, a)] {
            s.insert(r, Pkt::test(vec![i]));
        }
        let order: Vec<u8> =
            std::iter::from_fn(|| s.pop_due(Time(100_000)).map(|(_, p)| p.buf[0])).collect();
        assert_eq!(order, vec![2, 1, 3]);
    }
}
