//! Path-aware JSON parsing of [`Config`]: every error names the field
//! (`downlink.delay_us: ...`), unknown fields are rejected, `null` or a
//! missing field means "default".

use crate::config::{Config, ConfigError, DirectionConfig};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

const TOP_FIELDS: &[&str] = &["seed", "downlink", "uplink"];
const DIR_FIELDS: &[&str] = &[
    "rate_bps",
    "delay_us",
    "jitter_us",
    "jitter_dist",
    "reorder",
    "loss",
    "queue_limit_packets",
    "queue_limit_bytes",
    "outages",
    "rate_schedule",
    "trace_ms",
];

impl Config {
    /// Parse and validate a JSON document.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let v: Value = serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
        Config::from_value(&v)
    }

    /// Parse and validate an already-decoded JSON value.
    pub fn from_value(v: &Value) -> Result<Config, ConfigError> {
        let obj = as_object(v, "config")?;
        check_fields(obj, "", TOP_FIELDS)?;
        let mut c = Config::default();
        if let Some(s) = get(obj, "seed", "seed")? {
            c.seed = s;
        }
        if let Some(d) = obj.get("downlink").filter(|v| !v.is_null()) {
            c.downlink = parse_direction(d, "downlink")?;
        }
        if let Some(d) = obj.get("uplink").filter(|v| !v.is_null()) {
            c.uplink = parse_direction(d, "uplink")?;
        }
        c.validate()?;
        Ok(c)
    }

    /// The configuration as compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }
}

fn as_object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ConfigError> {
    v.as_object()
        .ok_or_else(|| ConfigError::field(path, format!("must be a JSON object, got {}", kind(v))))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn check_fields(obj: &Map<String, Value>, prefix: &str, known: &[&str]) -> Result<(), ConfigError> {
    for k in obj.keys() {
        if !known.contains(&k.as_str()) {
            return Err(ConfigError::field(
                format!("{prefix}{k}"),
                format!("unknown field (expected one of: {})", known.join(", ")),
            ));
        }
    }
    Ok(())
}

/// Deserialize `obj[key]`; `Ok(None)` when missing or null.
fn get<T: DeserializeOwned>(
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<T>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| ConfigError::field(path, e.to_string())),
    }
}

fn parse_direction(v: &Value, dir: &str) -> Result<DirectionConfig, ConfigError> {
    let obj = as_object(v, dir)?;
    check_fields(obj, &format!("{dir}."), DIR_FIELDS)?;
    let p = |k: &str| format!("{dir}.{k}");
    let mut d = DirectionConfig {
        rate_bps: get(obj, "rate_bps", &p("rate_bps"))?,
        queue_limit_packets: get(obj, "queue_limit_packets", &p("queue_limit_packets"))?,
        queue_limit_bytes: get(obj, "queue_limit_bytes", &p("queue_limit_bytes"))?,
        outages: get(obj, "outages", &p("outages"))?,
        rate_schedule: get(obj, "rate_schedule", &p("rate_schedule"))?,
        trace_ms: get(obj, "trace_ms", &p("trace_ms"))?,
        ..DirectionConfig::default()
    };
    if let Some(x) = get(obj, "delay_us", &p("delay_us"))? {
        d.delay_us = x;
    }
    if let Some(x) = get(obj, "jitter_us", &p("jitter_us"))? {
        d.jitter_us = x;
    }
    if let Some(x) = get(obj, "jitter_dist", &p("jitter_dist"))? {
        d.jitter_dist = x;
    }
    if let Some(x) = get(obj, "reorder", &p("reorder"))? {
        d.reorder = x;
    }
    if let Some(x) = get(obj, "loss", &p("loss"))? {
        d.loss = x;
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LossConfig, OutageConfig};

    fn err(json: &str) -> String {
        Config::from_json(json).unwrap_err().to_string()
    }

    #[test]
    fn defaults() {
        let c = Config::from_json("{}").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.seed, 1);
        let c = Config::from_json(r#"{"downlink": null, "uplink": {"delay_us": null}}"#).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn full_example() {
        let c = Config::from_json(
            r#"{"seed": 9, "downlink": {"rate_bps": 20000000, "delay_us": 25000,
            "jitter_us": 2000, "jitter_dist": "paretonormal", "reorder": true,
            "loss": {"model": "gilbert_elliott", "p": 0.01, "r": 0.3},
            "queue_limit_packets": 100, "outages": {"period_ms": 1000, "down_ms": 100},
            "rate_schedule": {"period_ms": 1000, "steps": [[0, 20000000], [800, 2000000]]},
            "trace_ms": [1, 2, 3]}}"#,
        )
        .unwrap();
        assert_eq!(c.seed, 9);
        assert_eq!(
            c.downlink.loss,
            LossConfig::GilbertElliott {
                p: 0.01,
                r: 0.3,
                loss_good: 0.0,
                loss_bad: 1.0
            }
        );
        assert_eq!(
            c.downlink.outages,
            Some(OutageConfig {
                period_ms: 1000,
                down_ms: 100,
                offset_ms: 0
            })
        );
        assert_eq!(Config::from_json(&c.to_json()).unwrap(), c);
    }

    #[test]
    fn errors_name_the_field() {
        let e = err(r#"{"downlink": {"loss": {"model": "bernoulli", "p": 1.5}}}"#);
        assert!(e.starts_with("downlink.loss.p: must be in [0, 1]"), "{e}");
        let e = err(r#"{"uplink": {"rate_bps": 0}}"#);
        assert!(e.starts_with("uplink.rate_bps: must be in [1, "), "{e}");
        let e = err(r#"{"uplink": {"delay_us": -5}}"#);
        assert!(e.starts_with("uplink.delay_us: "), "{e}");
        let e = err(
            r#"{"uplink": {"rate_schedule": {"period_ms": 1000, "steps": [[0, 5], [500, 6], [400, 7]]}}}"#,
        );
        assert!(
            e.starts_with("uplink.rate_schedule.steps[2]: t_ms must be strictly increasing"),
            "{e}"
        );
        let e = err(r#"{"uplink": {"rate_schedule": {"period_ms": 1000, "steps": [[10, 5]]}}}"#);
        assert!(
            e.starts_with("uplink.rate_schedule.steps[0]: first step"),
            "{e}"
        );
        let e = err(r#"{"downlink": {"outages": {"period_ms": 100, "down_ms": 200}}}"#);
        assert!(
            e.starts_with("downlink.outages.down_ms: must be in [0, 100]"),
            "{e}"
        );
        let e = err(r#"{"downlink": {"bogus": 1}}"#);
        assert!(e.starts_with("downlink.bogus: unknown field"), "{e}");
        let e = err(r#"{"extra": 1}"#);
        assert!(e.starts_with("extra: unknown field"), "{e}");
        let e = err(r#"{"downlink": {"loss": {"model": "bernoulli", "p": 0.1, "q": 1}}}"#);
        assert!(e.starts_with("downlink.loss: unknown field `q`"), "{e}");
        let e = err(r#"{"downlink": {"loss": {"model": "weird"}}}"#);
        assert!(e.starts_with("downlink.loss: unknown variant"), "{e}");
        let e = err(r#"{"downlink": {"jitter_dist": "cauchy"}}"#);
        assert!(e.starts_with("downlink.jitter_dist: "), "{e}");
        let e = err(r#"{"downlink": {"trace_ms": [5, 3]}}"#);
        assert!(
            e.starts_with("downlink.trace_ms[1]: timestamps must be non-decreasing"),
            "{e}"
        );
        let e = err(r#"{"downlink": {"trace_ms": [0]}}"#);
        assert!(
            e.starts_with("downlink.trace_ms[0]: must be in [1, "),
            "{e}"
        );
        let e = err(r#"{"downlink": {"queue_limit_packets": 0}}"#);
        assert!(
            e.starts_with("downlink.queue_limit_packets: must be in [1, "),
            "{e}"
        );
        let e = err(r#"{"downlink": {"loss": {"model": "gilbert_elliott", "p": 0.1, "r": -0.1}}}"#);
        assert!(e.starts_with("downlink.loss.r: must be in [0, 1]"), "{e}");
        let e = err(r#"{"seed": "x"}"#);
        assert!(e.starts_with("seed: "), "{e}");
        let e = err("[1]");
        assert!(e.starts_with("config: must be a JSON object"), "{e}");
        let e = err("{");
        assert!(e.starts_with("invalid JSON: "), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn default_queue() {
        use crate::config::default_queue_limit_bytes;
        assert_eq!(default_queue_limit_bytes(1_000_000, 0), 64 * 1024);
        // 100 Mbit/s, 25 ms one-way: 12.5 MB/s * 50 ms.
        assert_eq!(default_queue_limit_bytes(100_000_000, 25_000), 625_000);
        assert_eq!(default_queue_limit_bytes(1_000_000_000, 0), 1_250_000);
    }
}
