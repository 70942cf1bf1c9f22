//! Periodic link outages: the link is down for `down_ms` of every
//! `period_ms`, the first window starting `offset_ms` after the
//! configuration was applied. Packets arriving while down are dropped.

use crate::config::OutageConfig;
use crate::time::{Time, NS_PER_MS};

/// Outage schedule anchored at the time the config was applied.
#[derive(Debug, Clone, Default)]
pub struct Outage {
    cfg: Option<OutageConfig>,
    origin: Time,
}

impl Outage {
    pub fn new(cfg: Option<&OutageConfig>, applied_at: Time) -> Outage {
        Outage {
            cfg: cfg.cloned(),
            origin: applied_at,
        }
    }

    /// Is the link down at `now`? Windows are half-open: [start, start+down).
    pub fn is_down(&self, now: Time) -> bool {
        let Some(c) = &self.cfg else { return false };
        if c.down_ms == 0 {
            return false;
        }
        let since = now.nanos_since(self.origin);
        let offset = c.offset_ms.saturating_mul(NS_PER_MS);
        if since < offset || now < self.origin {
            return false;
        }
        let phase = (since - offset) % c.period_ms.saturating_mul(NS_PER_MS);
        phase < c.down_ms.saturating_mul(NS_PER_MS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows() {
        let cfg = OutageConfig {
            period_ms: 100,
            down_ms: 10,
            offset_ms: 50,
        };
        let o = Outage::new(Some(&cfg), Time::from_millis(1000));
        let at = |ms: u64| o.is_down(Time::from_millis(1000 + ms));
        assert!(!at(0));
        assert!(!at(49));
        assert!(at(50));
        assert!(o.is_down(Time(Time::from_millis(1060).0 - 1)));
        assert!(!at(60));
        assert!(at(150));
        assert!(at(159));
        assert!(!at(160));
        assert!(!Outage::new(None, Time::ZERO).is_down(Time::from_millis(5)));
        assert!(!o.is_down(Time::from_millis(10)));
    }
}
