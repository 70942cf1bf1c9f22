//! The link server: when the bottleneck can start serializing a packet and
//! when its last bit has left. One trait, shared by the constant-rate and
//! schedule servers (`rate.rs`) and the mahimahi trace server (`trace.rs`).

use crate::config::DirectionConfig;
use crate::rate::{ConstantRate, ScheduleServer, Unlimited};
use crate::time::Time;
use crate::trace::TraceServer;

/// A bottleneck link that serializes packets one at a time, FIFO.
pub trait LinkServer: Send + std::fmt::Debug {
    /// Earliest time `>= t` at which a packet can start service (the
    /// moment the queue discipline hands it over). `fresh`: the packet
    /// arrived at `t` to an idle link and an empty queue, so (as in
    /// mahimahi, which runs the link up to `t` before enqueueing) a delivery
    /// opportunity at exactly `t` has already passed.
    fn earliest_start(&self, t: Time, _fresh: bool) -> Time {
        t
    }
    /// Completion time of a `len`-byte packet that starts service at `start`
    /// (a time given by [`LinkServer::earliest_start`]). Calls come in FIFO
    /// order with non-decreasing `start`.
    fn finish(&mut self, start: Time, len: usize) -> Time;
    /// Rate in force at `now` in bit/s; 0 means unlimited.
    fn rate_at(&self, now: Time) -> u64;
}

/// Build the server described by `cfg`: trace, else schedule, else constant
/// rate, else unlimited. Schedules and traces start at `applied_at`.
pub fn build_server(cfg: &DirectionConfig, applied_at: Time) -> Box<dyn LinkServer> {
    if let Some(t) = &cfg.trace_ms {
        return Box::new(TraceServer::new(t, applied_at));
    }
    if let Some(s) = &cfg.rate_schedule {
        return Box::new(ScheduleServer::new(s.period_ms, &s.steps, applied_at));
    }
    match cfg.rate_bps {
        Some(r) => Box::new(ConstantRate { rate_bps: r }),
        None => Box::new(Unlimited),
    }
}
