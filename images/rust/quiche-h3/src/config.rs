//! quiche's Config for both roles: ALPN h3, TLS 1.3 (BoringSSL), the congestion control quiche offers (CUBIC, its
//! default; Reno; BBRv2 from its gcongestion port: `set_cc_algorithm`), flow-control windows as the lab's other
//! QUIC endpoints (quiche auto-tunes up to the max windows), the key log when SSLKEYLOGFILE is set. The client
//! verifies the server's certificate against the lab CA (never skipped).

use quiche::CongestionControlAlgorithm as Algo;
use quiclab_h3_common::cc::{self, Choice};
use quiclab_h3_common::{CA_FILE, WINDOW};

/// The largest UDP payload sent and received (quiche's example apps' 1350: fits the lab's 1500-byte MTU).
pub const MAX_DATAGRAM: usize = 1350;
const IDLE_TIMEOUT_MS: u64 = 30_000;

pub const CHOICES: &[Choice<Algo>] = &[
    Choice { name: "cubic", aliases: &[], value: Algo::CUBIC },
    Choice { name: "reno", aliases: &["newreno"], value: Algo::Reno },
    Choice { name: "bbr2", aliases: &["bbr", "bbr2_gcongestion"], value: Algo::Bbr2Gcongestion },
];

pub enum Role<'a> {
    Server { cert: &'a str, key: &'a str },
    Client,
}

/// The Config, and the lab's name of the congestion control in it; Err: one line.
pub fn build(role: Role, cc_name: &str) -> Result<(quiche::Config, &'static str), String> {
    let choice = cc::choose(cc_name, CHOICES)?;
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(|e| format!("quiche config: {e}"))?;
    c.set_application_protos(quiche::h3::APPLICATION_PROTOCOL).map_err(|e| format!("ALPN: {e}"))?;
    c.set_max_idle_timeout(IDLE_TIMEOUT_MS);
    c.set_max_recv_udp_payload_size(MAX_DATAGRAM);
    c.set_max_send_udp_payload_size(MAX_DATAGRAM);
    c.set_initial_max_data(WINDOW * 3 / 2);
    c.set_initial_max_stream_data_bidi_local(WINDOW);
    c.set_initial_max_stream_data_bidi_remote(WINDOW);
    c.set_initial_max_stream_data_uni(1 << 20);
    c.set_initial_max_streams_bidi(100);
    c.set_initial_max_streams_uni(100);
    c.set_max_connection_window(WINDOW * 3 / 2);
    c.set_max_stream_window(WINDOW);
    c.set_cc_algorithm(choice.value);
    if std::env::var_os("SSLKEYLOGFILE").is_some_and(|p| !p.is_empty()) {
        c.log_keys();
    }
    match role {
        Role::Server { cert, key } => {
            c.load_cert_chain_from_pem_file(cert).map_err(|e| format!("{cert}: {e}"))?;
            c.load_priv_key_from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
            c.verify_peer(false);
        }
        Role::Client => {
            c.load_verify_locations_from_file(CA_FILE).map_err(|e| format!("{CA_FILE}: {e}"))?;
            c.verify_peer(true);
        }
    }
    Ok((c, choice.name))
}
