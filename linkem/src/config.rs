//! Configuration types (the JSON contract) and their defaults.
//!
//! Parsing with field paths lives in `config_parse.rs`, range checks in
//! `validate.rs`.

use serde::{Deserialize, Serialize};
use thiserror::Error;

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
pub struct Config {
    pub seed: u64,
    /// Packets whose destination is in the downlink CIDR (toward the client).
    pub downlink: DirectionConfig,
    /// Packets whose destination is in the uplink CIDR (toward the server).
    pub uplink: DirectionConfig,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            seed: 1,
            downlink: DirectionConfig::default(),
            uplink: DirectionConfig::default(),
        }
    }
}

/// Parameters of one direction of the link.
#[derive(Serialize, Clone, Debug, PartialEq, Default)]
pub struct DirectionConfig {
    pub rate_bps: Option<u64>,
    pub delay_us: u64,
    pub jitter_us: u64,
    pub jitter_dist: JitterDist,
    pub reorder: bool,
    pub loss: LossConfig,
    pub queue_limit_packets: Option<u32>,
    pub queue_limit_bytes: Option<u64>,
    pub outages: Option<OutageConfig>,
    pub rate_schedule: Option<RateSchedule>,
    pub trace_ms: Option<Vec<u64>>,
}

/// Jitter distribution (netem's names).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum JitterDist {
    #[default]
    Uniform,
    Normal,
    Pareto,
    Paretonormal,
}

/// Loss model.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum LossConfig {
    #[default]
    None,
    Bernoulli {
        p: f64,
    },
    GilbertElliott {
        p: f64,
        r: f64,
        #[serde(default)]
        loss_good: f64,
        #[serde(default = "one")]
        loss_bad: f64,
    },
}

fn one() -> f64 {
    1.0
}

impl LossConfig {
    /// Long-run mean loss ratio of the model.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossConfig::None => 0.0,
            LossConfig::Bernoulli { p } => p,
            LossConfig::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                if p + r <= 0.0 {
                    loss_good
                } else {
                    p / (p + r) * loss_bad + r / (p + r) * loss_good
                }
            }
        }
    }
}

/// Periodic link outages.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct OutageConfig {
    pub period_ms: u64,
    pub down_ms: u64,
    #[serde(default)]
    pub offset_ms: u64,
}

/// Piecewise-constant rate, looping every `period_ms`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RateSchedule {
    pub period_ms: u64,
    /// `[t_ms, rate_bps]`, sorted by `t_ms`, first at 0.
    pub steps: Vec<(u64, u64)>,
}

/// Default drop-tail limit in bytes when neither limit is configured: one
/// bandwidth-delay product, `rate_bps / 8 * max(2 * delay, 10 ms)`, but at
/// least 64 KiB.
pub fn default_queue_limit_bytes(rate_bps: u64, delay_us: u64) -> u64 {
    let window_us = u128::from(delay_us.saturating_mul(2).max(10_000));
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

    /// `(packet limit, byte limit)` in force, applying the BDP default.
    pub fn queue_limits(&self) -> (Option<u32>, Option<u64>) {
        match (self.queue_limit_packets, self.queue_limit_bytes) {
            (None, None) => {
                let rate = self.nominal_rate_bps().unwrap_or(0);
                (None, Some(default_queue_limit_bytes(rate, self.delay_us)))
            }
            limits => limits,
        }
    }
}

/// Mean delivery rate of a mahimahi trace, bit/s.
pub fn trace_mean_rate_bps(trace_ms: &[u64]) -> u64 {
    let last = trace_ms.last().copied().unwrap_or(0).max(1);
    let bits = trace_ms.len() as u128 * u128::from(TRACE_OPPORTUNITY_BYTES) * 8 * 1000;
    u64::try_from(bits / u128::from(last)).unwrap_or(u64::MAX)
}
