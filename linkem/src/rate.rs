//! Rate-based link servers: unlimited, constant rate, and a
//! piecewise-constant rate schedule (integrated exactly across step
//! boundaries). The trait is in `server.rs`, traces in `trace.rs`.

use crate::server::LinkServer;
use crate::time::{Time, NS_PER_MS, NS_PER_SEC};

/// No bottleneck: packets leave as soon as they arrive.
#[derive(Debug, Clone, Copy)]
pub struct Unlimited;

impl LinkServer for Unlimited {
    fn finish(&mut self, start: Time, _len: usize) -> Time {
        start
    }
    fn rate_at(&self, _now: Time) -> u64 {
        0
    }
}

/// Fixed rate: serialization time = len * 8 / rate, rounded up to 1 ns.
#[derive(Debug, Clone, Copy)]
pub struct ConstantRate {
    pub rate_bps: u64,
}

impl LinkServer for ConstantRate {
    fn finish(&mut self, start: Time, len: usize) -> Time {
        start.plus_nanos(crate::time::serialization_nanos(len as u64, self.rate_bps))
    }
    fn rate_at(&self, _now: Time) -> u64 {
        self.rate_bps
    }
}

/// Piecewise-constant rate looping every `period`.
#[derive(Debug, Clone)]
pub struct ScheduleServer {
    period_ns: u64,
    /// (start offset in ns, rate bit/s), sorted, first at 0.
    steps: Vec<(u64, u64)>,
    origin: Time,
}

impl ScheduleServer {
    pub fn new(period_ms: u64, steps: &[(u64, u64)], applied_at: Time) -> ScheduleServer {
        let steps = steps
            .iter()
            .map(|&(t, r)| (t.saturating_mul(NS_PER_MS), r))
            .collect();
        ScheduleServer {
            period_ns: period_ms.saturating_mul(NS_PER_MS).max(1),
            steps,
            origin: applied_at,
        }
    }

    /// (rate, ns until the step ends) at time `t`.
    fn step_at(&self, t: Time) -> (u64, u64) {
        let phase = t.nanos_since(self.origin) % self.period_ns;
        let i = self.steps.partition_point(|&(s, _)| s <= phase).max(1) - 1;
        let end = self.steps.get(i + 1).map_or(self.period_ns, |&(s, _)| s);
        (self.steps[i].1, end.saturating_sub(phase).max(1))
    }
}

impl LinkServer for ScheduleServer {
    fn finish(&mut self, start: Time, len: usize) -> Time {
        // Work in bit-nanoseconds so the integration is exact in integers.
        let mut remaining = u128::from(len as u64) * 8 * u128::from(NS_PER_SEC);
        let mut t = start.max(self.origin);
        if self.steps.iter().all(|&(_, r)| r == 0) {
            return Time::MAX;
        }
        loop {
            let (rate, left_ns) = self.step_at(t);
            let r = u128::from(rate);
            let cap = r * u128::from(left_ns);
            if rate > 0 && cap >= remaining {
                let ns = remaining.div_ceil(r);
                return t.plus_nanos(u64::try_from(ns).unwrap_or(u64::MAX));
            }
            remaining -= cap;
            t = t.plus_nanos(left_ns);
            if t == Time::MAX {
                return t;
            }
        }
    }

    fn rate_at(&self, now: Time) -> u64 {
        self.step_at(now).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant() {
        let mut s = ConstantRate {
            rate_bps: 12_000_000,
        };
        assert_eq!(s.finish(Time::from_millis(1), 1500), Time::from_millis(2));
        assert_eq!(Unlimited.finish(Time(5), 1500), Time(5));
    }

    #[test]
    fn schedule_integrates_across_steps() {
        // 12 Mbit/s for 1 ms, then 1.2 Mbit/s for 9 ms.
        let mut s = ScheduleServer::new(10, &[(0, 12_000_000), (1, 1_200_000)], Time::ZERO);
        // 1500 B = 12000 bit = 1 ms at the first rate.
        assert_eq!(s.finish(Time::ZERO, 1500), Time::from_millis(1));
        // Start at 0.5 ms: 6000 bits in the first step, 6000 at 1.2 Mbit/s = 5 ms.
        assert_eq!(s.finish(Time::from_micros(500), 1500), Time::from_millis(6));
        // Wraps: starting at 9.5 ms, 600 bits by 10 ms, then 11400 bits at 12 Mbit/s.
        assert_eq!(
            s.finish(Time::from_micros(9500), 1500),
            Time::from_micros(10_950)
        );
        assert_eq!(s.rate_at(Time::from_micros(10_500)), 12_000_000);
        assert_eq!(s.rate_at(Time::from_micros(12_000)), 1_200_000);
    }

    #[test]
    fn schedule_with_zero_step() {
        let mut s = ScheduleServer::new(10, &[(0, 0), (5, 12_000_000)], Time::ZERO);
        assert_eq!(s.finish(Time::ZERO, 1500), Time::from_millis(6));
    }
}
