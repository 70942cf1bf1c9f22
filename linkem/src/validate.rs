//! Validation of a parsed [`Config`]: every error names the field and the
//! allowed range.

use crate::config::{
    Config, ConfigError, DirectionConfig, LossConfig, QdiscConfig, RateSchedule, MAX_DELAY_US,
    MAX_PERIOD_MS, MAX_RATE_BPS, MAX_TRACE_ENTRIES,
};

/// Bounds of `overhead_bytes` and `mpu_bytes`.
pub const MIN_OVERHEAD: i64 = -1500;
pub const MAX_OVERHEAD: i64 = 65_535;
pub const MAX_MPU: u64 = 65_535;

impl Config {
    /// Check every field; the error names the first offending one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.downlink.validate("downlink")?;
        self.uplink.validate("uplink")
    }
}

fn check_prob(field: String, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(ConfigError::field(
            field,
            format!("must be in [0, 1], got {v}"),
        ))
    }
}

fn check_range(field: String, v: u64, lo: u64, hi: u64) -> Result<(), ConfigError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(ConfigError::field(
            field,
            format!("must be in [{lo}, {hi}], got {v}"),
        ))
    }
}

impl DirectionConfig {
    pub fn validate(&self, dir: &str) -> Result<(), ConfigError> {
        let f = |name: &str| format!("{dir}.{name}");
        if let Some(r) = self.rate_bps {
            check_range(f("rate_bps"), r, 1, MAX_RATE_BPS)
                .map_err(|e| annotate(e, " (null = unlimited)"))?;
        }
        check_range(f("delay_us"), self.delay_us, 0, MAX_DELAY_US)?;
        check_range(f("path_delay_us"), self.path_delay_us, 0, MAX_DELAY_US)?;
        check_range(f("jitter_us"), self.jitter_us, 0, MAX_DELAY_US)?;
        if let Some(i) = self.jitter_interval_us {
            check_range(f("jitter_interval_us"), i, 1, MAX_DELAY_US)
                .map_err(|e| annotate(e, " (null = the default)"))?;
        }
        validate_loss(&self.loss, &f("loss"))?;
        validate_loss(&self.loss_after, &f("loss_after"))?;
        check_prob(f("duplicate"), self.duplicate)?;
        check_prob(f("corrupt"), self.corrupt)?;
        check_prob(f("reorder_prob"), self.reorder_prob)?;
        check_range(
            f("reorder_gap"),
            u64::from(self.reorder_gap),
            1,
            u64::from(u32::MAX),
        )?;
        if self.reorder_prob > 0.0 && self.delay_us == 0 {
            return Err(ConfigError::field(
                f("reorder_prob"),
                "needs delay_us > 0 (a reordered packet skips the delay), as in netem",
            ));
        }
        let o = i64::from(self.overhead_bytes);
        if !(MIN_OVERHEAD..=MAX_OVERHEAD).contains(&o) {
            return Err(ConfigError::field(
                f("overhead_bytes"),
                format!("must be in [{MIN_OVERHEAD}, {MAX_OVERHEAD}], got {o}"),
            ));
        }
        check_range(f("mpu_bytes"), u64::from(self.mpu_bytes), 0, MAX_MPU)?;
        validate_qdisc(&self.qdisc, &f("qdisc"))?;
        if let Some(s) = &self.slot {
            check_range(f("slot.delay_us"), s.delay_us, 1, MAX_DELAY_US)?;
            check_range(f("slot.jitter_us"), s.jitter_us, 0, MAX_DELAY_US)?;
            if let Some(p) = s.packets {
                check_range(f("slot.packets"), u64::from(p), 1, u64::from(u32::MAX))?;
            }
            if let Some(b) = s.bytes {
                check_range(f("slot.bytes"), b, 1, u64::MAX)?;
            }
        }
        if let Some(n) = self.queue_limit_packets {
            check_range(
                f("queue_limit_packets"),
                u64::from(n),
                1,
                u64::from(u32::MAX),
            )?;
        }
        if let Some(b) = self.queue_limit_bytes {
            check_range(f("queue_limit_bytes"), b, 1, u64::MAX)?;
        }
        if let Some(o) = &self.outages {
            check_range(f("outages.period_ms"), o.period_ms, 1, MAX_PERIOD_MS)?;
            check_range(f("outages.down_ms"), o.down_ms, 0, o.period_ms)
                .map_err(|e| annotate(e, " (must not exceed period_ms)"))?;
            check_range(f("outages.offset_ms"), o.offset_ms, 0, MAX_PERIOD_MS)?;
        }
        if let Some(s) = &self.rate_schedule {
            validate_schedule(s, &f("rate_schedule"))?;
        }
        if let Some(t) = &self.trace_ms {
            validate_trace(t, &f("trace_ms"))?;
        }
        Ok(())
    }
}

fn validate_loss(l: &LossConfig, path: &str) -> Result<(), ConfigError> {
    match *l {
        LossConfig::None => Ok(()),
        LossConfig::Bernoulli { p } => check_prob(format!("{path}.p"), p),
        LossConfig::GilbertElliott {
            p,
            r,
            loss_good,
            loss_bad,
        } => {
            check_prob(format!("{path}.p"), p)?;
            check_prob(format!("{path}.r"), r)?;
            check_prob(format!("{path}.loss_good"), loss_good)?;
            check_prob(format!("{path}.loss_bad"), loss_bad)
        }
    }
}

fn validate_qdisc(q: &QdiscConfig, path: &str) -> Result<(), ConfigError> {
    let f = |n: &str| format!("{path}.{n}");
    match *q {
        QdiscConfig::DropTail | QdiscConfig::DropHead => Ok(()),
        QdiscConfig::Codel {
            target_us,
            interval_us,
            ..
        } => {
            check_range(f("target_us"), target_us, 1, MAX_DELAY_US)?;
            check_range(f("interval_us"), interval_us, 1, MAX_DELAY_US)
        }
        QdiscConfig::FqCodel {
            target_us,
            interval_us,
            flows,
            quantum,
            ..
        } => {
            check_range(f("target_us"), target_us, 1, MAX_DELAY_US)?;
            check_range(f("interval_us"), interval_us, 1, MAX_DELAY_US)?;
            check_range(f("flows"), u64::from(flows), 1, 65_536)?;
            check_range(f("quantum"), u64::from(quantum), 256, 1 << 20)
        }
        QdiscConfig::Pie {
            target_us,
            tupdate_us,
            alpha,
            beta,
            max_burst_us,
            ..
        } => {
            check_range(f("target_us"), target_us, 1, MAX_DELAY_US)?;
            check_range(f("tupdate_us"), tupdate_us, 1_000, MAX_DELAY_US)?;
            check_range(f("max_burst_us"), max_burst_us, 0, MAX_DELAY_US)?;
            for (name, v) in [("alpha", alpha), ("beta", beta)] {
                if !(v.is_finite() && (0.0..=2.0).contains(&v)) {
                    return Err(ConfigError::field(
                        f(name),
                        format!("must be in [0, 2], got {v}"),
                    ));
                }
            }
            Ok(())
        }
    }
}

fn annotate(e: ConfigError, extra: &str) -> ConfigError {
    match e {
        ConfigError::Field { field, msg } => ConfigError::Field {
            field,
            msg: msg + extra,
        },
        other => other,
    }
}

fn validate_schedule(s: &RateSchedule, path: &str) -> Result<(), ConfigError> {
    check_range(format!("{path}.period_ms"), s.period_ms, 1, MAX_PERIOD_MS)?;
    let steps = format!("{path}.steps");
    if s.steps.is_empty() {
        return Err(ConfigError::field(
            steps,
            "must have at least one [t_ms, rate_bps] step",
        ));
    }
    if s.steps[0].0 != 0 {
        return Err(ConfigError::field(
            format!("{steps}[0]"),
            format!("first step must start at t_ms 0, got {}", s.steps[0].0),
        ));
    }
    for (i, &(t, r)) in s.steps.iter().enumerate() {
        if i > 0 && t <= s.steps[i - 1].0 {
            return Err(ConfigError::field(
                format!("{steps}[{i}]"),
                format!(
                    "t_ms must be strictly increasing, got {t} after {}",
                    s.steps[i - 1].0
                ),
            ));
        }
        if t >= s.period_ms {
            return Err(ConfigError::field(
                format!("{steps}[{i}]"),
                format!("t_ms must be below period_ms {}, got {t}", s.period_ms),
            ));
        }
        check_range(format!("{steps}[{i}].rate_bps"), r, 0, MAX_RATE_BPS)?;
    }
    if s.steps.iter().all(|&(_, r)| r == 0) {
        return Err(ConfigError::field(
            steps,
            "at least one step must have rate_bps > 0",
        ));
    }
    Ok(())
}

fn validate_trace(t: &[u64], path: &str) -> Result<(), ConfigError> {
    if t.is_empty() || t.len() > MAX_TRACE_ENTRIES {
        return Err(ConfigError::field(
            path,
            format!(
                "must have 1 to {MAX_TRACE_ENTRIES} entries, got {}",
                t.len()
            ),
        ));
    }
    for i in 1..t.len() {
        if t[i] < t[i - 1] {
            return Err(ConfigError::field(
                format!("{path}[{i}]"),
                format!(
                    "timestamps must be non-decreasing, got {} after {}",
                    t[i],
                    t[i - 1]
                ),
            ));
        }
    }
    let last = t[t.len() - 1];
    check_range(format!("{path}[{}]", t.len() - 1), last, 1, MAX_PERIOD_MS)
        .map_err(|e| annotate(e, " (last timestamp is the loop period)"))
}
