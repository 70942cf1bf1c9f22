//! Configuration types (the JSON contract) and their defaults.
//!
//! Parsing with field paths lives in `config_parse.rs`, range checks in
//! `validate.rs`.

use serde::Serialize;
use thiserror::Error;

pub use crate::config_types::{
    JitterDist, LossConfig, OutageConfig, QdiscConfig, RateSchedule, SlotConfig,
};

/// Upper bound for any rate, bit/s (1 Tbit/s).
pub const MAX_RATE_BPS: u64 = 1_000_000_000_000;
/// Upper bound for delay and jitter, microseconds (60 s).
pub const MAX_DELAY_US: u64 = 60_000_000;
/// Upper bound for schedule periods, offsets and trace lengths, ms (1 day).
pub const MAX_PERIOD_MS: u64 = 86_400_000;
/// Upper bound for the number of trace entries.
pub const MAX_TRACE_ENTRIES: usize = 10_000_000;
/// Floor of the default queue limit, bytes.
pub const MIN_DEFAULT_QUEUE_BYTES: u64 = 64 * 1024;
/// Bytes delivered per mahimahi delivery opportunity.
pub const TRACE_OPPORTUNITY_BYTES: u64 = 1500;

/// A configuration error naming the offending field.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("{field}: {msg}")]
    Field { field: String, msg: String },
}

impl ConfigError {
    pub fn field(field: impl Into<String>, msg: impl Into<String>) -> ConfigError {
        ConfigError::Field {
            field: field.into(),
            msg: msg.into(),
        }
    }
}

/// The whole emulator configuration.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(default, deny_unknown_fields))]
pub struct Config {
    pub seed: u64,
    /// `false` (default): applying this configuration restarts every random
    /// stream from `seed` (and the Gilbert-Elliott chains in the good state),
    /// so the same configuration and the same packets give the same drops and
    /// delays. `true`: the random streams and the chains' states continue
    /// (a change in the middle of a transfer); the seed must then stay the
    /// one in force.
    pub keep_state: bool,
    /// Packets whose destination is in the downlink CIDR (toward the client).
    pub downlink: DirectionConfig,
    /// Packets whose destination is in the uplink CIDR (toward the server).
    pub uplink: DirectionConfig,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            seed: 1,
            keep_state: false,
            downlink: DirectionConfig::default(),
            uplink: DirectionConfig::default(),
        }
    }
}

impl Config {
    /// The round trip the link adds (both directions' `delay_us`), in us.
    pub fn rtt_us(&self) -> u64 {
        self.downlink.delay_us.saturating_add(self.uplink.delay_us)
    }

    /// `(packet limit, byte limit)` in force for `dir`, applying the default
    /// (one bandwidth-delay product of the whole path's RTT) when neither is
    /// given.
    pub fn queue_limits(&self, dir: &DirectionConfig) -> (Option<u32>, Option<u64>) {
        dir.queue_limits_for_rtt(self.rtt_us())
    }
}

/// Parameters of one direction of the link.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(default, deny_unknown_fields))]
pub struct DirectionConfig {
    pub rate_bps: Option<u64>,
    pub delay_us: u64,
    /// The part of `delay_us` the lab's own path already adds in this
    /// direction (measured by the orchestrator); linkem adds the rest.
    pub path_delay_us: u64,
    pub jitter_us: u64,
    pub jitter_dist: JitterDist,
    /// With order kept: how long each delay value of the delay process is
    /// held; `None` = [`DirectionConfig::jitter_interval_ns`]'s default.
    pub jitter_interval_us: Option<u64>,
    pub reorder: bool,
    /// netem `reorder P gap N`: once `reorder_gap - 1` packets have been
    /// delayed normally, each packet skips the delay with probability P.
    pub reorder_prob: f64,
    pub reorder_gap: u32,
    pub loss: LossConfig,
    /// Loss after the link (radio-like): the packet used link time first.
    pub loss_after: LossConfig,
    /// netem `ecn`: a loss event marks an ECN-capable packet CE instead.
    pub loss_ecn: bool,
    /// Probability that a packet is duplicated (netem `duplicate`).
    pub duplicate: f64,
    /// Probability that one bit of a packet is flipped (netem `corrupt`).
    pub corrupt: f64,
    pub queue_limit_packets: Option<u32>,
    pub queue_limit_bytes: Option<u64>,
    pub qdisc: QdiscConfig,
    /// Bytes added to every packet's length for the rate (netem `rate`'s
    /// packet overhead; may be negative).
    pub overhead_bytes: i32,
    /// Minimum length a packet occupies on the link, after the overhead.
    pub mpu_bytes: u32,
    pub slot: Option<SlotConfig>,
    pub outages: Option<OutageConfig>,
    pub rate_schedule: Option<RateSchedule>,
    pub trace_ms: Option<Vec<u64>>,
}

impl Default for DirectionConfig {
    fn default() -> DirectionConfig {
        DirectionConfig {
            rate_bps: None,
            delay_us: 0,
            path_delay_us: 0,
            jitter_us: 0,
            jitter_dist: JitterDist::Uniform,
            jitter_interval_us: None,
            reorder: false,
            reorder_prob: 0.0,
            reorder_gap: 1,
            loss: LossConfig::None,
            loss_after: LossConfig::None,
            loss_ecn: false,
            duplicate: 0.0,
            corrupt: 0.0,
            queue_limit_packets: None,
            queue_limit_bytes: None,
            qdisc: QdiscConfig::DropTail,
            overhead_bytes: 0,
            mpu_bytes: 0,
            slot: None,
            outages: None,
            rate_schedule: None,
            trace_ms: None,
        }
    }
}

/// The default delay-process interval is this many times the jitter...
pub const JITTER_INTERVAL_FACTOR: u64 = 5;
/// ... but at least this long (us).
pub const MIN_JITTER_INTERVAL_US: u64 = 1_000;

/// Default queue limit in bytes when neither limit is configured: one
/// bandwidth-delay product of the whole path, `rate_bps / 8 * max(rtt, 10 ms)`,
/// but at least 64 KiB.
pub fn default_queue_limit_bytes(rate_bps: u64, rtt_us: u64) -> u64 {
    let window_us = u128::from(rtt_us.max(10_000));
    let bdp = u128::from(rate_bps) * window_us / 8 / 1_000_000;
    u64::try_from(bdp)
        .unwrap_or(u64::MAX)
        .max(MIN_DEFAULT_QUEUE_BYTES)
}

impl DirectionConfig {
    /// Rate used to size the default queue: the constant rate, the highest
    /// step of a schedule, or the mean rate of a trace (`None` = unlimited).
    pub fn nominal_rate_bps(&self) -> Option<u64> {
        if let Some(t) = &self.trace_ms {
            return Some(trace_mean_rate_bps(t));
        }
        if let Some(s) = &self.rate_schedule {
            return s.steps.iter().map(|&(_, r)| r).max();
        }
        self.rate_bps
    }

    /// `(packet limit, byte limit)` in force, applying the BDP default for a
    /// path with round-trip time `rtt_us`.
    pub fn queue_limits_for_rtt(&self, rtt_us: u64) -> (Option<u32>, Option<u64>) {
        match (self.queue_limit_packets, self.queue_limit_bytes) {
            (None, None) => {
                let rate = self.nominal_rate_bps().unwrap_or(0);
                (None, Some(default_queue_limit_bytes(rate, rtt_us)))
            }
            limits => limits,
        }
    }

    /// How long the delay process holds each value, ns: `jitter_interval_us`,
    /// or by default `max(1 ms, 5 * jitter)`.
    pub fn jitter_interval_ns(&self) -> u64 {
        let us = self.jitter_interval_us.unwrap_or_else(|| {
            self.jitter_us
                .saturating_mul(JITTER_INTERVAL_FACTOR)
                .max(MIN_JITTER_INTERVAL_US)
        });
        us.saturating_mul(1_000)
    }

    /// The delay linkem itself adds, us (`delay_us - path_delay_us`).
    pub fn added_delay_us(&self) -> u64 {
        self.delay_us.saturating_sub(self.path_delay_us)
    }

    /// A packet's length on the link: `max(len + overhead, mpu, 1)`.
    pub fn wire_len(&self, len: usize) -> usize {
        let l = (len as i64 + i64::from(self.overhead_bytes)).max(i64::from(self.mpu_bytes));
        usize::try_from(l.max(1)).unwrap_or(1)
    }
}

/// Mean delivery rate of a mahimahi trace, bit/s.
pub fn trace_mean_rate_bps(trace_ms: &[u64]) -> u64 {
    let last = trace_ms.last().copied().unwrap_or(0).max(1);
    let bits = trace_ms.len() as u128 * u128::from(TRACE_OPPORTUNITY_BYTES) * 8 * 1000;
    u64::try_from(bits / u128::from(last)).unwrap_or(u64::MAX)
}
