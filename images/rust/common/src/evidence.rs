//! The evidence a stack writes where the library can: the TLS key log (SSLKEYLOGFILE, NSS key log format, appended)
//! and qlog (QLOGDIR: one JSON-SEQ file per connection, `<id>_<role>.sqlog`, as quic-go names its own).

use std::fs::{self, File, OpenOptions};
use std::path::PathBuf;

/// The qlog file name for a connection (`id`: its original destination connection ID, hex).
pub fn qlog_name(id: &str, role: &str) -> String {
    format!("{id}_{role}.sqlog")
}

/// SSLKEYLOGFILE opened for appending, or None (unset, or it cannot be opened: said on stderr).
pub fn key_log() -> Option<File> {
    let path = std::env::var_os("SSLKEYLOGFILE").filter(|p| !p.is_empty())?;
    match OpenOptions::new().create(true).append(true).open(&path) {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("key log {}: {e}", PathBuf::from(&path).display());
            None
        }
    }
}

/// Whether QLOGDIR asks for qlog.
pub fn qlog_dir() -> Option<PathBuf> {
    std::env::var_os("QLOGDIR").filter(|p| !p.is_empty()).map(PathBuf::from)
}

/// A new qlog file in QLOGDIR for this connection, or None (unset, or it cannot be made: said on stderr).
pub fn qlog_file(id: &str, role: &str) -> Option<File> {
    let dir = qlog_dir()?;
    let path = dir.join(qlog_name(id, role));
    match fs::create_dir_all(&dir).and_then(|()| File::create(&path)) {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("qlog {}: {e}", path.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn qlog_names_match_the_labs_collection() {
        // lab/evidence/capture.py collects *.sqlog files and prefixes them client-/server-
        assert_eq!(super::qlog_name("0a1b", "client"), "0a1b_client.sqlog");
    }
}
