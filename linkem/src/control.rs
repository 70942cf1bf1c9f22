//! Control plane: a small HTTP server thread.
//!
//! `GET /metrics`, `GET /config`, `PUT /config` (also POST), `GET /healthz`.
//! New configurations are validated here, handed to the loop(s) through a
//! channel plus an eventfd wakeup each, and acknowledged once every loop has
//! applied them. With one loop per TUN device (`--tun-down`/`--tun-up`) each
//! loop publishes its own snapshot and `GET /metrics` shows their sum.

use crate::config::Config;
use crate::http::{read_request, write_response};
use crate::metrics;
use crate::stats::Snapshot;
use crate::sys::{monotonic_now, Waker};
use crate::time::Time;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// State shared between the loop(s) (writers) and the control thread (reader).
#[derive(Debug, Default)]
pub struct Shared {
    /// Published by the first (or only) loop.
    pub snapshot: Mutex<Snapshot>,
    pub config: Mutex<Config>,
    /// Published by the other loops, one slot each (empty with a single loop).
    pub others: Vec<Mutex<Snapshot>>,
}

impl Shared {
    /// Shared state for `loops` loops (at least one).
    pub fn for_loops(loops: usize) -> Shared {
        Shared {
            others: (1..loops).map(|_| Mutex::default()).collect(),
            ..Shared::default()
        }
    }

    /// Where loop `i` publishes its snapshot.
    pub fn slot(&self, i: usize) -> &Mutex<Snapshot> {
        match i {
            0 => &self.snapshot,
            _ => &self.others[i - 1],
        }
    }

    /// The sum of all loops' snapshots, as `GET /metrics` shows it.
    pub fn merged_snapshot(&self) -> Snapshot {
        let mut s = lock(&self.snapshot).clone();
        for o in &self.others {
            s.merge(&lock(o));
        }
        s
    }
}

/// How the control thread reaches one loop.
#[derive(Debug, Clone)]
pub struct LoopHandle {
    pub tx: Sender<ConfigRequest>,
    pub waker: Arc<Waker>,
}

/// A configuration for the main loop to apply; it answers on `applied`.
#[derive(Debug)]
pub struct ConfigRequest {
    pub config: Config,
    /// When the change takes effect: one instant for every loop (and so for both directions).
    pub at: Time,
    pub applied: SyncSender<Config>,
}

/// Channel pair for configuration requests.
pub fn channel() -> (Sender<ConfigRequest>, Receiver<ConfigRequest>) {
    mpsc::channel()
}

/// Serve the control API on `listener` until the process exits (one loop).
pub fn spawn(
    listener: TcpListener,
    shared: Arc<Shared>,
    tx: Sender<ConfigRequest>,
    waker: Arc<Waker>,
) -> std::io::Result<JoinHandle<()>> {
    spawn_loops(listener, shared, vec![LoopHandle { tx, waker }])
}

/// Serve the control API on `listener` until the process exits; a new
/// configuration goes to every loop in `loops`.
pub fn spawn_loops(
    listener: TcpListener,
    shared: Arc<Shared>,
    loops: Vec<LoopHandle>,
) -> std::io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name("linkem-control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(stream) = conn else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
                handle(&stream, &shared, &loops);
            }
        })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn handle(stream: &TcpStream, shared: &Shared, loops: &[LoopHandle]) {
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
            let snap = shared.merged_snapshot();
            (
                200,
                metrics::CONTENT_TYPE,
                metrics::render(&snap, crate::VERSION),
            )
        }
        ("GET", "/config") => (200, JSON, lock(&shared.config).to_json() + "\n"),
        ("PUT" | "POST", "/config") => put_config(&req.body, shared, loops),
        ("GET", "/healthz") => (200, TEXT, "ok\n".to_string()),
        (_, "/metrics" | "/config" | "/healthz") => (405, TEXT, "method not allowed\n".to_string()),
        _ => (404, TEXT, "not found\n".to_string()),
    };
    let _ = write_response(stream, status, ctype, body.as_bytes());
}

fn put_config(body: &[u8], shared: &Shared, loops: &[LoopHandle]) -> (u16, &'static str, String) {
    const TEXT: &str = "text/plain; charset=utf-8";
    let text = match std::str::from_utf8(body) {
        Ok(t) => t,
        Err(_) => return (400, TEXT, "invalid JSON: body is not UTF-8\n".to_string()),
    };
    let config = match Config::from_json(text) {
        Ok(c) => c,
        Err(e) => return (400, TEXT, format!("{e}\n")),
    };
    let in_force = lock(&shared.config).seed;
    if config.keep_state && config.seed != in_force {
        return (
            400,
            TEXT,
            format!(
                "keep_state: the random streams in force come from seed {in_force}; keep that seed to continue \
                 them, or set keep_state false to restart from seed {}\n",
                config.seed
            ),
        );
    }
    // Hand the config to every loop first, then wait for all of them: they apply it concurrently, at one instant.
    let at = monotonic_now();
    let mut acks = Vec::with_capacity(loops.len());
    for l in loops {
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        let req = ConfigRequest {
            config: config.clone(),
            at,
            applied: ack_tx,
        };
        if l.tx.send(req).is_err() {
            return (503, TEXT, "emulator loop is not running\n".to_string());
        }
        l.waker.wake();
        acks.push(ack_rx);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut applied = None;
    for ack in acks {
        let left = deadline.saturating_duration_since(Instant::now());
        match ack.recv_timeout(left) {
            Ok(c) => applied = Some(c),
            Err(_) => {
                return (
                    503,
                    TEXT,
                    "emulator loop did not apply the config in time\n".to_string(),
                )
            }
        }
    }
    match applied {
        Some(c) => (200, "application/json", c.to_json() + "\n"),
        None => (503, TEXT, "emulator loop is not running\n".to_string()),
    }
}
