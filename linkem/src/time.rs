//! Virtual time: nanoseconds since an arbitrary monotonic origin.
//!
//! The core never reads a clock; the driver converts `CLOCK_MONOTONIC` into
//! [`Time`] and passes it in.

use std::fmt;
use std::ops::{Add, Sub};

/// Nanoseconds per microsecond.
pub const NS_PER_US: u64 = 1_000;
/// Nanoseconds per millisecond.
pub const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds per second.
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// A point in time, in nanoseconds from an arbitrary monotonic origin.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    /// The origin.
    pub const ZERO: Time = Time(0);
    /// A time later than any real deadline.
    pub const MAX: Time = Time(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns)
    }
    pub const fn from_micros(us: u64) -> Time {
        Time(us.saturating_mul(NS_PER_US))
    }
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(NS_PER_MS))
    }
    pub const fn from_secs(s: u64) -> Time {
        Time(s.saturating_mul(NS_PER_SEC))
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// `self + ns`, saturating.
    pub const fn plus_nanos(self, ns: u64) -> Time {
        Time(self.0.saturating_add(ns))
    }
    /// Nanoseconds from `earlier` to `self` (0 if `earlier` is later).
    pub const fn nanos_since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<Dur> for Time {
    type Output = Time;
    fn add(self, d: Dur) -> Time {
        self.plus_nanos(d.0)
    }
}

impl Sub<Time> for Time {
    type Output = Dur;
    fn sub(self, earlier: Time) -> Dur {
        Dur(self.nanos_since(earlier))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}s", self.0 / NS_PER_SEC, self.0 % NS_PER_SEC)
    }
}

/// A non-negative duration in nanoseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub u64);

impl Dur {
    pub const ZERO: Dur = Dur(0);
    pub const fn from_nanos(ns: u64) -> Dur {
        Dur(ns)
    }
    pub const fn from_micros(us: u64) -> Dur {
        Dur(us.saturating_mul(NS_PER_US))
    }
    pub const fn from_millis(ms: u64) -> Dur {
        Dur(ms.saturating_mul(NS_PER_MS))
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_SEC as f64
    }
}

/// Serialization time in nanoseconds of `bytes` at `rate_bps` (rounded up).
pub fn serialization_nanos(bytes: u64, rate_bps: u64) -> u64 {
    debug_assert!(rate_bps > 0);
    let num = u128::from(bytes) * 8 * u128::from(NS_PER_SEC);
    let r = u128::from(rate_bps.max(1));
    u64::try_from(num.div_ceil(r)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        let t = Time::from_millis(5);
        assert_eq!(t.as_nanos(), 5_000_000);
        assert_eq!((t + Dur::from_micros(3)).as_nanos(), 5_003_000);
        assert_eq!(t - Time::from_millis(7), Dur::ZERO);
        assert_eq!(Time::MAX.plus_nanos(1), Time::MAX);
        assert_eq!(format!("{}", Time(1_000_000_001)), "1.000000001s");
    }

    #[test]
    fn serialization() {
        assert_eq!(serialization_nanos(1500, 12_000_000), 1_000_000);
        assert_eq!(serialization_nanos(1, 3), 2_666_666_667);
    }
}
