//! Control plane: a small HTTP server thread.
//!
//! `GET /metrics`, `GET /config`, `PUT /config` (also POST), `GET /healthz`.
//! New configurations are validated here, handed to the main loop through a
//! channel plus an eventfd wakeup, and acknowledged once applied.

use crate::config::Config;
use crate::http::{read_request, write_response};
use crate::metrics;
use crate::stats::Snapshot;
use crate::sys::Waker;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// State shared between the loop (writer) and the control thread (reader).
#[derive(Debug, Default)]
pub struct Shared {
    pub snapshot: Mutex<Snapshot>,
    pub config: Mutex<Config>,
}

/// A configuration for the main loop to apply; it answers on `applied`.
#[derive(Debug)]
pub struct ConfigRequest {
    pub config: Config,
    pub applied: SyncSender<Config>,
}

/// Channel pair for configuration requests.
pub fn channel() -> (Sender<ConfigRequest>, Receiver<ConfigRequest>) {
    mpsc::channel()
}

/// Serve the control API on `listener` until the process exits.
pub fn spawn(
    listener: TcpListener,
    shared: Arc<Shared>,
    tx: Sender<ConfigRequest>,
    waker: Arc<Waker>,
) -> std::io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name("linkem-control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(stream) = conn else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
                handle(&stream, &shared, &tx, &waker);
            }
        })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn handle(stream: &TcpStream, shared: &Shared, tx: &Sender<ConfigRequest>, waker: &Waker) {
    const JSON: &str = "application/json";
    const TEXT: &str = "text/plain; charset=utf-8";
    let req = match read_request(stream) {
        Ok(r) => r,
        Err(e) => {
            let _ = write_response(stream, 400, TEXT, format!("bad request: {e}\n").as_bytes());
            return;
        }
    };
    let path = req.path.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (req.method.as_str(), path) {
        ("GET", "/metrics") => {
            let snap = lock(&shared.snapshot).clone();
            (
                200,
                metrics::CONTENT_TYPE,
                metrics::render(&snap, crate::VERSION),
            )
        }
        ("GET", "/config") => (200, JSON, lock(&shared.config).to_json() + "\n"),
        ("PUT" | "POST", "/config") => put_config(&req.body, tx, waker),
        ("GET", "/healthz") => (200, TEXT, "ok\n".to_string()),
        (_, "/metrics" | "/config" | "/healthz") => (405, TEXT, "method not allowed\n".to_string()),
        _ => (404, TEXT, "not found\n".to_string()),
    };
    let _ = write_response(stream, status, ctype, body.as_bytes());
}

fn put_config(
    body: &[u8],
    tx: &Sender<ConfigRequest>,
    waker: &Waker,
) -> (u16, &'static str, String) {
    const TEXT: &str = "text/plain; charset=utf-8";
    let text = match std::str::from_utf8(body) {
        Ok(t) => t,
        Err(_) => return (400, TEXT, "invalid JSON: body is not UTF-8\n".to_string()),
    };
    let config = match Config::from_json(text) {
        Ok(c) => c,
        Err(e) => return (400, TEXT, format!("{e}\n")),
    };
    let (ack_tx, ack_rx) = mpsc::sync_channel(1);
    if tx
        .send(ConfigRequest {
            config,
            applied: ack_tx,
        })
        .is_err()
    {
        return (503, TEXT, "emulator loop is not running\n".to_string());
    }
    waker.wake();
    match ack_rx.recv_timeout(Duration::from_secs(2)) {
        Ok(applied) => (200, "application/json", applied.to_json() + "\n"),
        Err(_) => (
            503,
            TEXT,
            "emulator loop did not apply the config in time\n".to_string(),
        ),
    }
}
