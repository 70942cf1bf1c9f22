//! Path-aware JSON parsing of [`Config`]: every error names the field
//! (`downlink.delay_us: ...`), unknown fields are rejected, `null` or a
//! missing field means "default".

use crate::config::{Config, ConfigError, DirectionConfig};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub(crate) const TOP_FIELDS: &[&str] = &["seed", "keep_state", "downlink", "uplink"];
pub(crate) const DIR_FIELDS: &[&str] = &[
    "rate_bps",
    "delay_us",
    "path_delay_us",
    "jitter_us",
    "jitter_dist",
    "jitter_interval_us",
    "reorder",
    "reorder_prob",
    "reorder_gap",
    "loss",
    "loss_after",
    "loss_ecn",
    "duplicate",
    "corrupt",
    "queue_limit_packets",
    "queue_limit_bytes",
    "qdisc",
    "overhead_bytes",
    "mpu_bytes",
    "slot",
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
        if let Some(k) = get(obj, "keep_state", "keep_state")? {
            c.keep_state = k;
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
    let mut d = DirectionConfig::default();
    // A missing or null field keeps its default.
    macro_rules! field {
        ($name:ident) => {
            if let Some(x) = get(
                obj,
                stringify!($name),
                &format!("{dir}.{}", stringify!($name)),
            )? {
                d.$name = x;
            }
        };
        (option $name:ident) => {
            d.$name = get(
                obj,
                stringify!($name),
                &format!("{dir}.{}", stringify!($name)),
            )?;
        };
    }
    field!(option rate_bps);
    field!(delay_us);
    field!(path_delay_us);
    field!(jitter_us);
    field!(jitter_dist);
    field!(option jitter_interval_us);
    field!(reorder);
    field!(reorder_prob);
    field!(reorder_gap);
    field!(loss);
    field!(loss_after);
    field!(loss_ecn);
    field!(duplicate);
    field!(corrupt);
    field!(option queue_limit_packets);
    field!(option queue_limit_bytes);
    field!(qdisc);
    field!(overhead_bytes);
    field!(mpu_bytes);
    field!(option slot);
    field!(option outages);
    field!(option rate_schedule);
    field!(option trace_ms);
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
        // 100 Mbit/s, 50 ms RTT: 12.5 MB/s * 50 ms.
        assert_eq!(default_queue_limit_bytes(100_000_000, 50_000), 625_000);
        assert_eq!(default_queue_limit_bytes(1_000_000_000, 0), 1_250_000);
        // Each direction is sized from the whole path's RTT, not from its own delay.
        let c = Config::from_json(
            r#"{"downlink": {"rate_bps": 100000000, "delay_us": 40000},
                "uplink": {"rate_bps": 100000000, "delay_us": 10000}}"#,
        )
        .unwrap();
        assert_eq!(c.queue_limits(&c.downlink), (None, Some(625_000)));
        assert_eq!(c.queue_limits(&c.uplink), (None, Some(625_000)));
    }

    #[test]
    fn new_fields_parse_and_round_trip() {
        let c = Config::from_json(
            r#"{"keep_state": true, "downlink": {"qdisc": {"kind": "fq_codel", "target_us": 3000},
                "slot": {"delay_us": 800, "jitter_us": 200, "packets": 4},
                "duplicate": 0.01, "corrupt": 0.02, "reorder_prob": 0.25, "reorder_gap": 5, "delay_us": 1000,
                "loss_after": {"model": "bernoulli", "p": 0.1}, "loss_ecn": true,
                "overhead_bytes": -4, "mpu_bytes": 64, "path_delay_us": 120, "jitter_interval_us": 2000}}"#,
        )
        .unwrap();
        assert!(c.keep_state);
        assert_eq!(
            c.downlink.qdisc,
            crate::config::QdiscConfig::FqCodel {
                target_us: 3000,
                interval_us: 100_000,
                ecn: true,
                flows: 1024,
                quantum: 1500
            }
        );
        assert_eq!(c.downlink.slot.as_ref().unwrap().packets, Some(4));
        assert_eq!(c.downlink.wire_len(40), 64);
        assert_eq!(c.downlink.wire_len(1500), 1496);
        assert_eq!(c.downlink.added_delay_us(), 880);
        assert_eq!(Config::from_json(&c.to_json()).unwrap(), c);
        let e = err(r#"{"downlink": {"qdisc": {"kind": "red"}}}"#);
        assert!(
            e.starts_with("downlink.qdisc: unknown variant `red`"),
            "{e}"
        );
        let e = err(r#"{"downlink": {"qdisc": {"kind": "codel", "target": 5}}}"#);
        assert!(
            e.starts_with("downlink.qdisc: unknown field `target`"),
            "{e}"
        );
    }
}
