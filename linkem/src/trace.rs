//! Trace-driven link server with mahimahi `link_queue` semantics.
//!
//! Each trace entry is a millisecond timestamp at which one delivery
//! opportunity of 1500 bytes occurs; the trace loops with period = last
//! timestamp (so an entry at the period and one at 0 are two opportunities
//! at the same instant). Opportunities that pass while the queue is empty
//! are wasted; several small packets can share one opportunity, and a packet
//! larger than what is left of an opportunity consumes further ones. As in
//! mahimahi (`LinkQueue::read_packet` runs the link up to the arrival time
//! before it enqueues), a packet that arrives to an empty queue at the very
//! instant of an opportunity cannot use it.

use crate::config::{trace_mean_rate_bps, TRACE_OPPORTUNITY_BYTES};
use crate::server::LinkServer;
use crate::time::{Time, NS_PER_MS};

/// Position of an opportunity: (loop number, index in the trace).
type Pos = (u64, usize);

#[derive(Debug, Clone)]
pub struct TraceServer {
    trace_ns: Vec<u64>,
    period_ns: u64,
    origin: Time,
    mean_bps: u64,
    /// Next opportunity not yet used.
    next: Pos,
    /// Time of the last opportunity used and the bytes left in it.
    cur_time: Time,
    cur_left: u64,
}

impl TraceServer {
    /// `trace_ms` must be validated: non-empty, non-decreasing, last > 0.
    pub fn new(trace_ms: &[u64], applied_at: Time) -> TraceServer {
        let trace_ns: Vec<u64> = trace_ms
            .iter()
            .map(|&t| t.saturating_mul(NS_PER_MS))
            .collect();
        let period_ns = trace_ns.last().copied().unwrap_or(NS_PER_MS).max(1);
        TraceServer {
            trace_ns: if trace_ms.is_empty() {
                vec![period_ns]
            } else {
                trace_ns
            },
            period_ns,
            origin: applied_at,
            mean_bps: trace_mean_rate_bps(trace_ms),
            next: (0, 0),
            cur_time: applied_at,
            cur_left: 0,
        }
    }

    fn time_of(&self, (cycle, i): Pos) -> Time {
        self.origin
            .plus_nanos(cycle.saturating_mul(self.period_ns))
            .plus_nanos(self.trace_ns[i])
    }

    fn step(&self, (cycle, i): Pos) -> Pos {
        if i + 1 < self.trace_ns.len() {
            (cycle, i + 1)
        } else {
            (cycle + 1, 0)
        }
    }

    /// First opportunity at or after `t`.
    fn first_at_or_after(&self, t: Time) -> Pos {
        let target = t.nanos_since(self.origin);
        let (k, off) = (target / self.period_ns, target % self.period_ns);
        let n = self.trace_ns.len();
        if k > 0 && off == 0 {
            // Entries equal to the period in the previous loop fall on `t`.
            let i = self.trace_ns.partition_point(|&x| x < self.period_ns);
            if i < n {
                return (k - 1, i);
            }
        }
        let i = self.trace_ns.partition_point(|&x| x < off);
        if i < n {
            (k, i)
        } else {
            (k + 1, 0)
        }
    }
}

impl LinkServer for TraceServer {
    fn earliest_start(&self, t: Time, fresh: bool) -> Time {
        if !fresh && self.cur_left > 0 && t <= self.cur_time {
            return self.cur_time;
        }
        let from = if fresh { t.plus_nanos(1) } else { t };
        self.time_of(self.next.max(self.first_at_or_after(from)))
    }

    fn finish(&mut self, start: Time, len: usize) -> Time {
        let mut remaining = (len as u64).max(1);
        if self.cur_left > 0 && start <= self.cur_time {
            let used = self.cur_left.min(remaining);
            self.cur_left -= used;
            remaining -= used;
            if remaining == 0 {
                return self.cur_time;
            }
        }
        self.cur_left = 0;
        self.next = self.next.max(self.first_at_or_after(start));
        loop {
            let t = self.time_of(self.next);
            self.next = self.step(self.next);
            let used = TRACE_OPPORTUNITY_BYTES.min(remaining);
            remaining -= used;
            if remaining == 0 {
                self.cur_time = t;
                self.cur_left = TRACE_OPPORTUNITY_BYTES - used;
                return t;
            }
        }
    }

    fn rate_at(&self, _now: Time) -> u64 {
        self.mean_bps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t: u64) -> Time {
        Time::from_millis(t)
    }

    #[test]
    fn earliest_start_skips_the_arrival_instant() {
        let s = TraceServer::new(&[0, 10, 10, 20], Time::ZERO);
        assert_eq!(s.earliest_start(ms(0), false), ms(0));
        assert_eq!(s.earliest_start(ms(0), true), ms(10));
        assert_eq!(s.earliest_start(ms(15), true), ms(20));
        assert_eq!(s.earliest_start(ms(20), true), ms(30));
    }

    #[test]
    fn opportunities_and_sharing() {
        let mut s = TraceServer::new(&[0, 10, 10, 20], Time::ZERO);
        // Two 750-byte packets share the opportunity at 0.
        assert_eq!(s.finish(ms(0), 750), ms(0));
        assert_eq!(s.finish(ms(0), 750), ms(0));
        // Next packet uses the next opportunity (10 ms).
        assert_eq!(s.finish(ms(0), 1500), ms(10));
        // A 2000-byte packet needs the second 10 ms one and the 20 ms one.
        assert_eq!(s.finish(ms(10), 2000), ms(20));
        // 1000 bytes left at 20 ms: a packet arriving at 20 ms uses them; the
        // loop's opportunity at 20 ms (entry 0 of loop 1) is then next.
        assert_eq!(s.finish(ms(20), 1000), ms(20));
        assert_eq!(s.finish(ms(20), 100), ms(20));
        // Arriving later wastes the leftover and the skipped opportunities.
        assert_eq!(s.finish(ms(25), 100), ms(30));
        assert_eq!(s.finish(ms(95), 100), ms(100));
        assert_eq!(s.finish(ms(100), 1500), ms(100));
        assert_eq!(s.rate_at(ms(0)), 4 * 12_000 * 1000 / 20);
    }
}
