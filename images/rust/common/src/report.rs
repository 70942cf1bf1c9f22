//! The one JSON line a fetch prints (the fields the lab's parse_fetch_json reads, as quic-go's and aioquic's
//! clients print them): `exit` (0, or curl's codes: 28 timed out, 60 certificate, 7 could not connect, 1 other),
//! `sha256` (the object's, or for N objects the SHA-256 of their hex digests concatenated), `curl` (curl's
//! %{json} names: http_version "3" only when every object arrived over HTTP/3 with 200, size_download,
//! time_appconnect = handshake, time_starttransfer = first response header section, time_total, errormsg, and
//! the congestion control in force `cc`), `transfers` (one per object) and `udp_rcvbuf_errors`.

use serde::Serialize;
use sha2::{Digest as _, Sha256};

/// How a fetch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    TimedOut(String),
    Certificate(String),
    Connect(String),
    Failed(String),
}

impl Outcome {
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Ok => 0,
            Outcome::TimedOut(_) => 28,
            Outcome::Certificate(_) => 60,
            Outcome::Connect(_) => 7,
            Outcome::Failed(_) => 1,
        }
    }

    fn message(&self) -> &str {
        match self {
            Outcome::Ok => "",
            Outcome::TimedOut(m) | Outcome::Certificate(m) | Outcome::Connect(m) | Outcome::Failed(m) => m,
        }
    }
}

/// curl's names for the summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Curl {
    pub http_version: String,
    pub response_code: u16,
    pub size_download: u64,
    pub time_total: f64,
    pub time_appconnect: f64,
    pub time_starttransfer: f64,
    pub errormsg: String,
    pub cc: String,
}

/// One object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transfer {
    pub url: String,
    pub status: u16,
    pub size: u64,
    pub sha256: String,
    /// wall-clock time (Unix seconds) when its last byte was read
    pub t: f64,
    /// seconds from its request to its last byte
    pub total: f64,
}

/// The line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    pub exit: i32,
    pub sha256: String,
    pub curl: Curl,
    pub transfers: Vec<Transfer>,
    pub udp_rcvbuf_errors: Option<i64>,
}

/// What the client measured, in seconds from the start of its connection attempt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timings {
    pub handshake: Option<f64>,
    pub first_header: Option<f64>,
    pub total: f64,
}

/// A body's size and SHA-256 as it streams in.
#[derive(Default)]
pub struct BodyDigest {
    sha: Sha256,
    size: u64,
}

impl BodyDigest {
    pub fn update(&mut self, chunk: &[u8]) {
        self.sha.update(chunk);
        self.size += chunk.len() as u64;
    }

    /// (size, hex digest)
    pub fn finish(self) -> (u64, String) {
        (self.size, hex::encode(self.sha.finalize()))
    }
}

/// The objects' digest: the one object's, or the SHA-256 of the N hex digests concatenated; "" for none.
pub fn combined_sha256(transfers: &[Transfer]) -> String {
    match transfers {
        [] => String::new(),
        [one] => one.sha256.clone(),
        many => {
            let mut h = Sha256::new();
            for t in many {
                h.update(t.sha256.as_bytes());
            }
            hex::encode(h.finalize())
        }
    }
}

fn micro(s: f64) -> f64 {
    (s * 1e6).round() / 1e6
}

/// The line for a fetch of `wanted` objects that got `transfers` and ended with `outcome`.
pub fn line(wanted: usize, transfers: Vec<Transfer>, timings: &Timings, outcome: Outcome, cc: &str,
            rcvbuf: Option<i64>) -> Line {
    // a fetch that "succeeded" with fewer objects, or with a status other than 200, is not a success
    let outcome = match outcome {
        Outcome::Ok if transfers.len() != wanted => {
            Outcome::Failed(format!("{} of {wanted} objects fetched", transfers.len()))
        }
        Outcome::Ok => match transfers.iter().find(|t| t.status != 200) {
            Some(t) => Outcome::Failed(format!("HTTP {} for {}", t.status, t.url)),
            None => Outcome::Ok,
        },
        other => other,
    };
    Line {
        exit: outcome.exit_code(),
        sha256: combined_sha256(&transfers),
        curl: Curl {
            http_version: if outcome == Outcome::Ok { "3".into() } else { String::new() },
            response_code: transfers.last().map_or(0, |t| t.status),
            size_download: transfers.iter().map(|t| t.size).sum(),
            time_total: micro(timings.total),
            time_appconnect: timings.handshake.map_or(0.0, micro),
            time_starttransfer: timings.first_header.map_or(0.0, micro),
            errormsg: outcome.message().to_string(),
            cc: cc.to_string(),
        },
        transfers,
        udp_rcvbuf_errors: rcvbuf,
    }
}

impl Line {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the report serializes")
    }
}

/// This network namespace's UDP receive-buffer drops so far (the image's `quiclab-rcvbuf-errors`), or None.
pub fn rcvbuf_errors() -> Option<i64> {
    let out = std::process::Command::new("quiclab-rcvbuf-errors").output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn transfer(i: usize, size: u64, status: u16) -> Transfer {
        let mut d = BodyDigest::default();
        d.update(&vec![i as u8; size as usize]);
        let (size, sha256) = d.finish();
        Transfer { url: format!("https://a/obj/{i}"), status, size, sha256, t: 1.0, total: 0.5 }
    }

    #[test]
    fn the_json_has_the_fields_the_lab_reads() {
        let l = line(1, vec![transfer(0, 3, 200)], &Timings { handshake: Some(0.1), first_header: Some(0.2), total: 0.3 },
                     Outcome::Ok, "cubic", Some(0));
        let v: serde_json::Value = serde_json::from_str(&l.to_json()).unwrap();
        assert_eq!(v["exit"], 0);
        assert_eq!(v["sha256"], "709e80c88487a2411e1ee4dfb9f22a861492d20c4765150c0c794abd70f8147c"); // sha256 of 3 zero bytes
        assert_eq!(v["curl"]["http_version"], "3");
        assert_eq!(v["curl"]["size_download"], 3);
        assert_eq!(v["curl"]["time_appconnect"], 0.1);
        assert_eq!(v["curl"]["time_starttransfer"], 0.2);
        assert_eq!(v["curl"]["cc"], "cubic");
        assert_eq!(v["udp_rcvbuf_errors"], 0);
        assert_eq!(v["transfers"][0]["status"], 200);
    }

    #[test]
    fn short_or_non_200_is_a_failure_and_never_h3() {
        let t = Timings::default();
        let short = line(2, vec![transfer(0, 3, 200)], &t, Outcome::Ok, "", None);
        assert_eq!((short.exit, short.curl.http_version.as_str()), (1, ""));
        assert_eq!(short.curl.errormsg, "1 of 2 objects fetched");
        let missing = line(1, vec![transfer(0, 9, 404)], &t, Outcome::Ok, "", None);
        assert_eq!((missing.exit, missing.curl.response_code), (1, 404));
        let late = line(1, vec![], &t, Outcome::TimedOut("timed out after 5 s".into()), "", None);
        assert_eq!((late.exit, late.sha256.as_str(), late.curl.errormsg.as_str()), (28, "", "timed out after 5 s"));
    }

    proptest! {
        /// Sizes add up, one object's digest is its own, N objects' is the digest of their digests, and the line
        /// says HTTP/3 exactly when it exits 0.
        #[test]
        fn sums_and_digests(sizes in proptest::collection::vec(0u64..5000, 0..6), ok in any::<bool>()) {
            let transfers: Vec<Transfer> = sizes.iter().enumerate().map(|(i, s)| transfer(i, *s, 200)).collect();
            let outcome = if ok { Outcome::Ok } else { Outcome::Connect("refused".into()) };
            let l = line(sizes.len(), transfers.clone(), &Timings::default(), outcome, "", None);
            prop_assert_eq!(l.curl.size_download, sizes.iter().sum::<u64>());
            prop_assert_eq!(l.exit == 0, l.curl.http_version == "3");
            prop_assert_eq!(l.exit == 0, ok);
            match transfers.len() {
                0 => prop_assert_eq!(l.sha256, ""),
                1 => prop_assert_eq!(&l.sha256, &transfers[0].sha256),
                _ => {
                    let joined: String = transfers.iter().map(|t| t.sha256.as_str()).collect();
                    prop_assert_eq!(l.sha256, hex::encode(Sha256::digest(joined.as_bytes())));
                }
            }
        }
    }
}
