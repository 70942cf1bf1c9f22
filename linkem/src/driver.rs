//! The real-time loop: TUN <-> [`Link`], control requests, signals.

use crate::cidr::Cidr;
use crate::config::Config;
use crate::control::{self, ConfigRequest, Shared};
use crate::link::{Link, LinkVerdict};
use crate::pipeline::Verdict;
use crate::sys::{monotonic_now, ppoll, set_timer_slack, termination_signalfd, Waker};
use crate::time::{Time, NS_PER_MS};
use crate::tun::Tun;
use std::collections::VecDeque;
use std::io::{self, ErrorKind};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

/// Options of `linkem run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub tun: String,
    pub downlink: Cidr,
    pub uplink: Cidr,
    pub listen: String,
    pub config: Config,
}

const READ_BATCH: usize = 256;
const PUBLISH_EVERY_NS: u64 = 50 * NS_PER_MS;
const MAX_POOL: usize = 8192;
const IDLE_TIMEOUT_NS: u64 = 1_000 * NS_PER_MS;

/// Recycled packet buffers, so the steady state does not allocate.
#[derive(Debug, Default)]
struct Pool(Vec<Vec<u8>>);

impl Pool {
    fn take(&mut self, data: &[u8]) -> Vec<u8> {
        let mut b = self.0.pop().unwrap_or_else(|| Vec::with_capacity(2048));
        b.clear();
        b.extend_from_slice(data);
        b
    }
    fn give(&mut self, b: Vec<u8>) {
        if self.0.len() < MAX_POOL && b.capacity() <= 16 * 1024 {
            self.0.push(b);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run until SIGINT/SIGTERM.
pub fn run(opts: RunOptions) -> io::Result<()> {
    let sigfd = termination_signalfd()?; // before spawning threads
    let tun = Tun::open(&opts.tun)?;
    if let Err(e) = tun.set_up() {
        eprintln!("linkem: warning: could not set {} up: {e}", tun.name());
    }
    let listener = TcpListener::bind(&opts.listen)
        .map_err(|e| io::Error::new(e.kind(), format!("listen on {}: {e}", opts.listen)))?;
    let shared = Arc::new(Shared::default());
    *lock(&shared.config) = opts.config.clone();
    let waker = Arc::new(Waker::new()?);
    let (tx, rx) = control::channel();
    control::spawn(listener, shared.clone(), tx, waker.clone())?;
    set_timer_slack(1_000);
    eprintln!(
        "linkem: {} downlink={} uplink={} control=http://{}",
        tun.name(),
        opts.downlink,
        opts.uplink,
        opts.listen
    );
    let link = Link::new(opts.downlink, opts.uplink, opts.config, monotonic_now());
    Loop {
        tun,
        link,
        shared,
        rx,
        waker,
        pool: Pool::default(),
        pending: VecDeque::new(),
        write_errors: 0,
    }
    .run(sigfd.as_raw_fd())
}

struct Loop {
    tun: Tun,
    link: Link,
    shared: Arc<Shared>,
    rx: Receiver<ConfigRequest>,
    waker: Arc<Waker>,
    pool: Pool,
    pending: VecDeque<Vec<u8>>,
    write_errors: u64,
}

/// How long before a deadline the loop stops sleeping and polls instead.
const SPIN_BEFORE_NS: u64 = 200_000;

impl Loop {
    fn run(mut self, sigfd: i32) -> io::Result<()> {
        let mut scratch = vec![0u8; 65536];
        let mut last_publish = Time::ZERO;
        let mut dirty = true;
        loop {
            let now = monotonic_now();
            let mut timeout = match self.link.next_deadline() {
                _ if !self.pending.is_empty() => IDLE_TIMEOUT_NS,
                Some(d) => d.nanos_since(now),
                None => IDLE_TIMEOUT_NS,
            };
            if dirty {
                timeout = timeout.min((last_publish.plus_nanos(PUBLISH_EVERY_NS)).nanos_since(now));
            }
            // Timer wake-ups are late by tens to hundreds of microseconds on a busy or virtualised host.
            // Sleep until SPIN_BEFORE_NS ahead of the deadline, then poll without sleeping, so packets leave
            // within a few microseconds of their release time (costs CPU only while a release is imminent).
            timeout = timeout.saturating_sub(SPIN_BEFORE_NS);
            let tun_events = libc::POLLIN
                | if self.pending.is_empty() {
                    0
                } else {
                    libc::POLLOUT
                };
            let mut fds = [
                libc::pollfd {
                    fd: self.tun.as_raw_fd(),
                    events: tun_events,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.waker.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: sigfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            ppoll(&mut fds, Some(timeout))?;
            if fds[2].revents != 0 {
                eprintln!("linkem: signal received, exiting");
                return Ok(());
            }
            if fds[1].revents != 0 {
                self.waker.drain();
                self.apply_configs();
                dirty = true;
            }
            if fds[0].revents & libc::POLLIN != 0 {
                dirty |= self.read_packets(&mut scratch)?;
            }
            dirty |= self.write_packets();
            let now = monotonic_now();
            if dirty && now.nanos_since(last_publish) >= PUBLISH_EVERY_NS {
                let mut snap = self.link.snapshot(now);
                snap.write_errors_total = self.write_errors;
                *lock(&self.shared.snapshot) = snap;
                last_publish = now;
                dirty = false;
            }
        }
    }

    fn apply_configs(&mut self) {
        while let Ok(req) = self.rx.try_recv() {
            self.link.reconfigure(req.config.clone(), monotonic_now());
            *lock(&self.shared.config) = req.config.clone();
            let _ = req.applied.try_send(req.config);
        }
    }

    /// Read up to a batch of packets; each is stamped when read.
    fn read_packets(&mut self, scratch: &mut [u8]) -> io::Result<bool> {
        let mut any = false;
        for _ in 0..READ_BATCH {
            let n = match self.tun.read(scratch) {
                Ok(n) => n,
                Err(e)
                    if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted =>
                {
                    break
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("read {}: {e}", self.tun.name()),
                    ))
                }
            };
            any = true;
            let pkt = self.pool.take(&scratch[..n]);
            match self.link.push(pkt, monotonic_now()) {
                LinkVerdict::Accepted(_) => {}
                LinkVerdict::Dropped(_, Verdict::Dropped(_, b)) | LinkVerdict::Malformed(b) => {
                    self.pool.give(b)
                }
                LinkVerdict::Dropped(_, Verdict::Accepted) => {}
            }
        }
        Ok(any)
    }

    /// Write every due packet; keep the rest on EAGAIN.
    fn write_packets(&mut self) -> bool {
        let mut any = false;
        loop {
            let pkt = match self.pending.pop_front() {
                Some(p) => p,
                None => match self.link.poll(monotonic_now()) {
                    Some(p) => p,
                    None => return any,
                },
            };
            any = true;
            match self.tun.write(&pkt) {
                Ok(_) => self.pool.give(pkt),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.pending.push_front(pkt);
                    return any;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => self.pending.push_front(pkt),
                Err(_) => {
                    self.write_errors += 1;
                    self.pool.give(pkt);
                }
            }
        }
    }
}
