//! linkem: a userspace network link emulator.
//!
//! The core (`time`, `rng`, `packet`, `ecn`, `config*`, `outage`, `loss`,
//! `impair`, `qdisc`, `server`, `rate`, `trace`, `jitter`, `delay`, `slot`,
//! `pipeline`, `link`, `stats`, `metrics`, `turn`) is sans-IO: it never
//! reads a clock or touches the OS; callers pass `now`. `tun`, `sys`,
//! `control`, `http`, `driver` and `cli` do the I/O.

pub mod cidr;
pub mod config;
pub mod config_parse;
#[cfg(test)]
mod config_schema;
pub mod config_types;
pub mod delay;
pub mod ecn;
pub mod impair;
pub mod jitter;
pub mod link;
pub mod loss;
pub mod metrics;
pub mod outage;
pub mod packet;
pub mod pipeline;
pub mod pkt;
pub mod qdisc;
pub mod rate;
pub mod rng;
pub mod server;
pub mod slot;
pub mod stats;
pub mod time;
pub mod trace;
pub mod turn;
pub mod validate;

pub use config::{Config, ConfigError, DirectionConfig};
pub use link::Link;
pub use pipeline::Pipeline;
pub use time::Time;

/// Crate version, shown in `quiclab_link_info`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[cfg(target_os = "linux")]
pub mod cli;
#[cfg(target_os = "linux")]
pub mod control;
#[cfg(target_os = "linux")]
pub mod driver;
pub mod http;
#[cfg(target_os = "linux")]
pub mod sys;
#[cfg(target_os = "linux")]
pub mod tun;
