//! The delay process used when order is kept: a delay that is a function of
//! time, not of the traffic.
//!
//! Per-packet jitter with order kept (`release = max(own, previous)`, as netem
//! does with a rate) makes the delivered delay depend on the packet rate: the
//! denser the packets, the more of them are held behind an earlier, longer
//! sample. Here the delay a packet gets depends only on when it leaves the
//! link. The process holds a value `v_k = max(0, delay + jitter * X_k)` for
//! `interval`, then moves to `v_{k+1}`: at once if `v_{k+1} >= v_k`, else
//! along a ramp of slope -1 (the delay falls exactly as fast as time passes,
//! so `t + d(t)` never decreases and packets cannot overtake each other),
//! after which `v_{k+1}` is held for `interval`, and so on.
//!
//! Every packet leaving at `t` gets `d(t)`, whatever the packet rate.
//!
//! The values change on a fixed grid: `v_k` is the value of
//! `[anchor + k * interval, anchor + (k+1) * interval)`. A rise happens at
//! the grid instant; a fall by `r` is a ramp of slope -1 centred on it (from
//! `r/2` before to `r/2` after), whose integral is that of the step it
//! replaces, so the time-mean of `d` is exactly the mean of the configured
//! distribution for every distribution (symmetric or not). Only when two
//! ramps would overlap (falls of more than the interval) does a ramp start
//! late (and the next value with it), which raises the mean slightly; the
//! default interval, 5 x the jitter, makes that rare (never for uniform). The spread is a little narrower than the
//! configured one (a ramp spreads the two values it joins evenly between
//! them); `tests/jitter.rs` measures both.

use crate::delay::DelayParams;
use crate::rng::Rng;
use crate::time::Time;

/// After this many intervals without a packet the grid starts afresh at the
/// next departure (bounded work after an idle period; the process is
/// stationary, so nothing observable depends on it).
const MAX_CATCH_UP: u32 = 10_000;

/// A delay that is a function of time (see the module docs).
#[derive(Debug, Clone)]
pub struct DelayProcess {
    params: DelayParams,
    interval_ns: u64,
    /// The value of the current grid interval, and of the next one.
    value: u64,
    next_value: u64,
    /// Until then, the delay is still falling toward `value` along a ramp:
    /// `d(t) = value + (ramp_end - t)`.
    ramp_end: Time,
    /// The end of the current grid interval.
    boundary: Time,
}

impl DelayProcess {
    /// A process whose grid starts at `at`, with a fresh value.
    pub fn new(params: DelayParams, interval_ns: u64, at: Time, rng: &mut Rng) -> DelayProcess {
        let interval_ns = interval_ns.max(1);
        DelayProcess {
            params,
            interval_ns,
            value: params.sample(rng),
            next_value: params.sample(rng),
            ramp_end: at,
            boundary: at.plus_nanos(interval_ns),
        }
    }

    /// The delay of a packet leaving the link at `t` (calls with
    /// non-decreasing `t`).
    pub fn delay_at(&mut self, t: Time, rng: &mut Rng) -> u64 {
        if self.params.jitter_ns == 0 {
            return self.params.delay_ns;
        }
        let mut steps = 0u32;
        loop {
            let fall = self.value.saturating_sub(self.next_value);
            // Where this interval's value stops holding: the start of the
            // ramp toward the next value (centred on the boundary, but not
            // before the ramp into this interval has ended), or the boundary.
            let hold_end = if fall > 0 {
                self.boundary
                    .0
                    .saturating_sub(fall / 2)
                    .max(self.ramp_end.0)
            } else {
                self.boundary.0.max(self.ramp_end.0)
            };
            if t.0 < hold_end {
                return self.value + self.ramp_end.nanos_since(t);
            }
            steps += 1;
            if steps > MAX_CATCH_UP {
                // Idle for long: a fresh grid from `t`.
                self.value = self.params.sample(rng);
                self.ramp_end = t;
                self.boundary = t.plus_nanos(self.interval_ns);
            } else {
                // Into the next interval: after a fall the new value is
                // reached at the end of the ramp, after a rise at once.
                let ramp_end = Time(hold_end).plus_nanos(fall);
                self.value = self.next_value;
                self.ramp_end = ramp_end;
                self.boundary = self.boundary.plus_nanos(self.interval_ns);
            }
            self.next_value = self.params.sample(rng);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::JitterDist;

    fn params(delay_ms: u64, jitter_ms: u64) -> DelayParams {
        DelayParams {
            delay_ns: delay_ms * 1_000_000,
            jitter_ns: jitter_ms * 1_000_000,
            dist: JitterDist::Uniform,
        }
    }

    #[test]
    fn release_never_decreases_and_rises_only_on_the_grid() {
        // (jitter ms, interval ns, ramps never overlap so rises are on the grid)
        for (jitter, interval, on_grid) in [
            (5u64, 10_000_000u64, true),
            (5, 1_000_000, false),
            (20, 2_000_000, false),
        ] {
            let mut rng = Rng::new(5);
            let mut p = DelayProcess::new(params(50, jitter), interval, Time::ZERO, &mut rng);
            let mut last = 0u64;
            let mut prev_d: Option<u64> = None;
            let mut rises = 0;
            for i in 0..2_000_000u64 {
                let t = Time(i * 1_000); // every 1 us for 2 s
                let d = p.delay_at(t, &mut rng);
                let lo = (50 - jitter) * 1_000_000;
                assert!((lo..=(50 + jitter) * 1_000_000).contains(&d), "{d}");
                let release = t.as_nanos() + d;
                assert!(release >= last, "t {t}: {release} < {last}");
                last = release;
                if prev_d.is_some_and(|x| d > x) {
                    if on_grid {
                        assert_eq!(t.as_nanos() % interval, 0, "a rise off the grid at {t}");
                    }
                    rises += 1;
                }
                prev_d = Some(d);
            }
            let min_rises = if on_grid {
                2_000_000_000 / interval / 4
            } else {
                20
            };
            assert!(rises > min_rises, "{rises}");
        }
    }

    #[test]
    fn constant_without_jitter() {
        let mut rng = Rng::new(1);
        let mut p = DelayProcess::new(params(7, 0), 1_000, Time::ZERO, &mut rng);
        assert_eq!(p.delay_at(Time::from_secs(100), &mut rng), 7_000_000);
    }

    #[test]
    fn long_idle_is_bounded_work() {
        let mut rng = Rng::new(1);
        let mut p = DelayProcess::new(params(20, 5), 1_000_000, Time::ZERO, &mut rng);
        let d = p.delay_at(Time::from_secs(86_400), &mut rng);
        assert!((15_000_000..=25_000_000).contains(&d));
    }
}
