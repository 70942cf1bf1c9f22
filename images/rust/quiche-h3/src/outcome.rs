//! How a client connection that closed before its objects arrived ended, from quiche's close errors (pure): a
//! TLS certificate alert from either side is curl's 60; a close before the handshake completed is 7 (could not
//! connect); after it, 1. The fetch's own deadline (28) is decided by the loop, not here.

use quiclab_h3_common::report::Outcome;

/// A CONNECTION_CLOSE as quiche reports it (`Connection::local_error` / `peer_error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Close {
    pub is_app: bool,
    pub code: u64,
    pub reason: String,
}

impl From<&quiche::ConnectionError> for Close {
    fn from(e: &quiche::ConnectionError) -> Self {
        Close { is_app: e.is_app, code: e.error_code, reason: String::from_utf8_lossy(&e.reason).into_owned() }
    }
}

/// QUIC's CRYPTO_ERROR range carries a TLS alert (RFC 9001 4.8): 0x100 + alert.
fn tls_alert(close: &Close) -> Option<u8> {
    (!close.is_app && (0x100..0x200).contains(&close.code)).then(|| (close.code - 0x100) as u8)
}

/// The certificate alerts (RFC 8446 6.2): bad, unsupported, revoked, expired, unknown, unknown CA.
fn is_certificate_alert(alert: u8) -> bool {
    matches!(alert, 42..=46 | 48)
}

fn describe(side: &str, c: &Close) -> String {
    let kind = match tls_alert(c) {
        Some(a) => format!("TLS alert {a}"),
        None if c.is_app => format!("application error 0x{:x}", c.code),
        None => format!("transport error 0x{:x}", c.code),
    };
    if c.reason.is_empty() { format!("{side} closed the connection: {kind}") } else {
        format!("{side} closed the connection: {kind} ({})", c.reason)
    }
}

/// The outcome of a connection that closed (or went idle) before every object arrived.
pub fn closed(established: bool, local: Option<Close>, peer: Option<Close>, idle_timed_out: bool) -> Outcome {
    let said = local.as_ref().map(|c| ("the client", c)).or(peer.as_ref().map(|c| ("the server", c)));
    let message = match (said, idle_timed_out) {
        (Some((side, c)), _) => describe(side, c),
        (None, true) => "the connection went idle (no packet from the server within its idle timeout)".to_string(),
        (None, false) => "the connection closed".to_string(),
    };
    if said.and_then(|(_, c)| tls_alert(c)).is_some_and(is_certificate_alert) {
        Outcome::Certificate(message)
    } else if !established {
        Outcome::Connect(message)
    } else {
        Outcome::Failed(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(is_app: bool, code: u64) -> Option<Close> {
        Some(Close { is_app, code, reason: String::new() })
    }

    #[test]
    fn certificate_alerts_idle_and_failures() {
        // BoringSSL's verify failure for an unknown issuer: alert 48 (unknown_ca), 0x130
        assert!(matches!(closed(false, close(false, 0x130), None, false), Outcome::Certificate(_)));
        assert!(matches!(closed(false, None, close(false, 0x12a), false), Outcome::Certificate(_)));
        assert_eq!(closed(false, None, None, true),
                   Outcome::Connect("the connection went idle (no packet from the server within its idle timeout)".into()));
        assert_eq!(closed(true, None, close(true, 0x10c), false),
                   Outcome::Failed("the server closed the connection: application error 0x10c".into()));
        // an application code in the crypto range is not a TLS alert
        assert!(matches!(closed(true, None, close(true, 0x130), false), Outcome::Failed(_)));
    }

    proptest! {
        /// Never Ok; Certificate exactly for the certificate alerts; otherwise the handshake decides 7 or 1.
        #[test]
        fn classification(established in any::<bool>(), code in 0u64..0x400, is_app in any::<bool>(),
                          local in any::<bool>(), idle in any::<bool>()) {
            let c = close(is_app, code);
            let (l, p) = if local { (c, None) } else { (None, c) };
            let o = closed(established, l, p, idle);
            let cert = !is_app && (0x100..0x200).contains(&code) && is_certificate_alert((code - 0x100) as u8);
            prop_assert_eq!(matches!(o, Outcome::Certificate(_)), cert);
            if !cert {
                prop_assert_eq!(o.exit_code(), if established { 1 } else { 7 });
            }
        }
    }
}
