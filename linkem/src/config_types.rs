//! The parameter types a direction's configuration is made of (loss models,
//! queue disciplines, slots, outages, schedules) and their defaults.

use serde::{Deserialize, Serialize};

/// Jitter distribution (netem's names).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OutageConfig {
    pub period_ms: u64,
    pub down_ms: u64,
    #[serde(default)]
    pub offset_ms: u64,
}

/// Piecewise-constant rate, looping every `period_ms`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RateSchedule {
    pub period_ms: u64,
    /// `[t_ms, rate_bps]`, sorted by `t_ms`, first at 0.
    pub steps: Vec<(u64, u64)>,
}

/// netem-style slotting: packets leave only at slot times; slot k+1 opens
/// `max(1 us, delay + jitter * X)` after slot k, and each slot passes at
/// most `packets` packets and (overshooting by at most one packet) `bytes`
/// bytes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SlotConfig {
    pub delay_us: u64,
    #[serde(default)]
    pub jitter_us: u64,
    #[serde(default)]
    pub dist: JitterDist,
    #[serde(default)]
    pub packets: Option<u32>,
    #[serde(default)]
    pub bytes: Option<u64>,
}

/// CoDel defaults (RFC 8289, Linux sch_codel / sch_fq_codel).
pub const CODEL_TARGET_US: u64 = 5_000;
pub const CODEL_INTERVAL_US: u64 = 100_000;
/// fq_codel defaults (RFC 8290, Linux sch_fq_codel). The quantum counts IP
/// bytes here (Linux's 1514 includes the 14-byte Ethernet header).
pub const FQ_FLOWS: u32 = 1024;
pub const FQ_QUANTUM: u32 = 1500;
/// PIE defaults (RFC 8033, Linux sch_pie).
pub const PIE_TARGET_US: u64 = 15_000;
pub const PIE_TUPDATE_US: u64 = 15_000;
pub const PIE_ALPHA: f64 = 0.125;
pub const PIE_BETA: f64 = 1.25;
pub const PIE_MAX_BURST_US: u64 = 150_000;

fn codel_target() -> u64 {
    CODEL_TARGET_US
}
fn codel_interval() -> u64 {
    CODEL_INTERVAL_US
}
fn yes() -> bool {
    true
}
fn fq_flows() -> u32 {
    FQ_FLOWS
}
fn fq_quantum() -> u32 {
    FQ_QUANTUM
}
fn pie_target() -> u64 {
    PIE_TARGET_US
}
fn pie_tupdate() -> u64 {
    PIE_TUPDATE_US
}
fn pie_alpha() -> f64 {
    PIE_ALPHA
}
fn pie_beta() -> f64 {
    PIE_BETA
}
fn pie_max_burst() -> u64 {
    PIE_MAX_BURST_US
}

/// The queue discipline in front of the link (its limits are the
/// direction's `queue_limit_packets` / `queue_limit_bytes`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum QdiscConfig {
    /// FIFO; an arriving packet that does not fit is dropped.
    #[default]
    DropTail,
    /// FIFO; when an arriving packet does not fit, the oldest waiting
    /// packets are dropped to make room.
    DropHead,
    /// CoDel (RFC 8289) on a FIFO.
    Codel {
        #[serde(default = "codel_target")]
        target_us: u64,
        #[serde(default = "codel_interval")]
        interval_us: u64,
        #[serde(default)]
        ecn: bool,
    },
    /// fq_codel (RFC 8290): per-flow queues served by deficit round robin,
    /// CoDel on each.
    FqCodel {
        #[serde(default = "codel_target")]
        target_us: u64,
        #[serde(default = "codel_interval")]
        interval_us: u64,
        #[serde(default = "yes")]
        ecn: bool,
        #[serde(default = "fq_flows")]
        flows: u32,
        #[serde(default = "fq_quantum")]
        quantum: u32,
    },
    /// PIE (RFC 8033, Linux sch_pie with timestamps for the queue delay).
    Pie {
        #[serde(default = "pie_target")]
        target_us: u64,
        #[serde(default = "pie_tupdate")]
        tupdate_us: u64,
        #[serde(default = "pie_alpha")]
        alpha: f64,
        #[serde(default = "pie_beta")]
        beta: f64,
        #[serde(default = "pie_max_burst")]
        max_burst_us: u64,
        #[serde(default)]
        ecn: bool,
        #[serde(default)]
        bytemode: bool,
    },
}

impl QdiscConfig {
    /// The kind's name as in the JSON (`drop_tail`, `codel`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            QdiscConfig::DropTail => "drop_tail",
            QdiscConfig::DropHead => "drop_head",
            QdiscConfig::Codel { .. } => "codel",
            QdiscConfig::FqCodel { .. } => "fq_codel",
            QdiscConfig::Pie { .. } => "pie",
        }
    }
}
