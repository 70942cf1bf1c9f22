//! quinn's transport settings for both roles: the congestion control (quinn offers CUBIC, its default, NewReno and
//! BBR: quinn::congestion), flow-control windows as the lab's other QUIC endpoints, and a qlog stream per
//! connection when QLOGDIR is set (quinn-proto's `qlog` feature; one TransportConfig per connection for that).

use std::sync::Arc;

use quiclab_h3_common::cc::{self, Choice};
use quiclab_h3_common::{evidence, WINDOW};
use quinn::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};
use quinn::{TransportConfig, VarInt};

/// The algorithms quinn offers, its default first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Cubic,
    NewReno,
    Bbr,
}

pub const CHOICES: &[Choice<Algorithm>] = &[
    Choice { name: "cubic", aliases: &[], value: Algorithm::Cubic },
    Choice { name: "newreno", aliases: &["reno"], value: Algorithm::NewReno },
    Choice { name: "bbr", aliases: &[], value: Algorithm::Bbr },
];

/// The lab's name for a CC setting, or the one line saying what is allowed.
pub fn algorithm(name: &str) -> Result<(&'static str, Algorithm), String> {
    cc::choose(name, CHOICES).map(|c| (c.name, c.value))
}

fn factory(algorithm: Algorithm) -> Arc<dyn ControllerFactory + Send + Sync> {
    match algorithm {
        Algorithm::Cubic => Arc::new(CubicConfig::default()),
        Algorithm::NewReno => Arc::new(NewRenoConfig::default()),
        Algorithm::Bbr => Arc::new(BbrConfig::default()),
    }
}

/// A connection's transport; `qlog`: (its id, role) names its qlog file when QLOGDIR is set (None: no qlog).
pub fn config(algorithm: Algorithm, qlog: Option<(&str, &str)>) -> TransportConfig {
    let mut t = TransportConfig::default();
    t.congestion_controller_factory(factory(algorithm));
    t.stream_receive_window(VarInt::from_u64(WINDOW).expect("fits"));
    t.receive_window(VarInt::from_u64(WINDOW * 3 / 2).expect("fits"));
    t.send_window(WINDOW * 3 / 2);
    if let Some((file, role)) = qlog.and_then(|(id, role)| Some((evidence::qlog_file(id, role)?, role))) {
        let mut q = quinn::QlogConfig::default();
        // unbuffered: the process exits without dropping the runtime, so nothing may wait in a buffer
        q.writer(Box::new(file))
            .title(Some(format!("quiclab-quinn {role}")));
        t.qlog_stream(q.into_stream());
    }
    t
}
