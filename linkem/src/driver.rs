//! The real-time loop: TUN <-> [`Link`], control requests, signals.

use crate::cidr::Cidr;
use crate::config::Config;
use crate::control::{self, ConfigRequest, LoopHandle, Shared};
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
use std::thread;

/// Options of `linkem run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The TUN device. Alone (`--tun`) it carries both directions; with `tun_up` (`--tun-down`) it carries
    /// the packets routed toward the client.
    pub tun: String,
    /// `--tun-up`: a second TUN device, served by its own loop on its own thread, carrying the packets routed
    /// toward the server.
    pub tun_up: Option<String>,
    pub downlink: Cidr,
    pub uplink: Cidr,
    pub listen: String,
    pub config: Config,
    /// `--spin-us`: how long before a release time the loop stops sleeping and polls instead (see
    /// [`DEFAULT_SPIN_NS`]).
    pub spin_ns: u64,
}

const READ_BATCH: usize = 256;
const PUBLISH_EVERY_NS: u64 = 50 * NS_PER_MS;
/// While nothing is queued, counters are published this soon after they change, so a reader that asks right
/// after a transfer ended (the sweep runner, for the wire bytes of the run) sees all of it.
const PUBLISH_IDLE_NS: u64 = 2 * NS_PER_MS;
const MAX_POOL: usize = 8192;
const IDLE_TIMEOUT_NS: u64 = 1_000 * NS_PER_MS;
/// Capacity of a fresh packet buffer; longer packets (MTU > 2048) still fit, with one extra copy.
const BUF_CAP: usize = 2048;

/// Recycled packet buffers, so the steady state does not allocate.
#[derive(Debug, Default)]
struct Pool(Vec<Vec<u8>>);

impl Pool {
    fn take(&mut self) -> Vec<u8> {
        self.0.pop().unwrap_or_else(|| Vec::with_capacity(BUF_CAP))
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

fn open_tun(name: &str) -> io::Result<Tun> {
    let tun = Tun::open(name)?;
    if let Err(e) = tun.set_up() {
        eprintln!("linkem: warning: could not set {} up: {e}", tun.name());
    }
    Ok(tun)
}

/// Run until SIGINT/SIGTERM (or until a loop fails).
///
/// One loop per TUN device. Each loop owns a whole [`Link`] (both pipelines and the pass-through), so any
/// packet is shaped by its direction's configuration whichever device it arrives on; with the recommended
/// routing (`--tun-down` gets only packets toward the client, `--tun-up` only those toward the server) each
/// direction's pipeline lives in exactly one loop, and the two directions run on different cores.
pub fn run(opts: RunOptions) -> io::Result<()> {
    let sigfd = termination_signalfd()?; // before spawning threads
    let mut tuns = vec![open_tun(&opts.tun)?];
    if let Some(up) = &opts.tun_up {
        tuns.push(open_tun(up)?);
    }
    let listener = TcpListener::bind(&opts.listen)
        .map_err(|e| io::Error::new(e.kind(), format!("listen on {}: {e}", opts.listen)))?;
    let shared = Arc::new(Shared::for_loops(tuns.len()));
    *lock(&shared.config) = opts.config.clone();
    let quit = Arc::new(Waker::new()?);
    let names: Vec<String> = tuns.iter().map(|t| t.name().to_string()).collect();
    let start = monotonic_now();
    let mut loops = Vec::new();
    let mut handles = Vec::new();
    for (index, tun) in tuns.into_iter().enumerate() {
        let waker = Arc::new(Waker::new()?);
        let (tx, rx) = control::channel();
        handles.push(LoopHandle {
            tx,
            waker: waker.clone(),
        });
        loops.push(Loop {
            index,
            tun,
            link: Link::new(opts.downlink, opts.uplink, opts.config.clone(), start),
            shared: shared.clone(),
            rx,
            waker,
            quit: quit.clone(),
            pool: Pool::default(),
            pending: VecDeque::new(),
            write_errors: 0,
            spin_ns: opts.spin_ns,
            last_release: Time::ZERO,
        });
    }
    control::spawn_loops(listener, shared, handles)?;
    eprintln!(
        "linkem: {} downlink={} uplink={} control=http://{}",
        names.join(" + "),
        opts.downlink,
        opts.uplink,
        opts.listen
    );
    let sig = sigfd.as_raw_fd();
    let first = loops.remove(0);
    let mut threads = Vec::new();
    for l in loops {
        let quit = quit.clone();
        let t = thread::Builder::new()
            .name(format!("linkem-{}", l.index))
            .spawn(move || {
                set_timer_slack(1_000);
                let r = l.run(sig);
                quit.wake();
                r
            })?;
        threads.push(t);
    }
    set_timer_slack(1_000);
    let mut result = first.run(sig);
    quit.wake();
    for t in threads {
        let r = t
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("loop thread panicked")));
        result = result.and(r);
    }
    result
}

struct Loop {
    /// Which snapshot slot this loop publishes to (0 = the first device).
    index: usize,
    tun: Tun,
    link: Link,
    shared: Arc<Shared>,
    rx: Receiver<ConfigRequest>,
    waker: Arc<Waker>,
    /// Woken when any loop ends, so the others end too.
    quit: Arc<Waker>,
    pool: Pool,
    pending: VecDeque<Vec<u8>>,
    write_errors: u64,
    spin_ns: u64,
    /// When this loop last wrote a packet (see [`SPIN_AFTER_GAP_NS`]).
    last_release: Time,
}

/// How long before a deadline the loop stops sleeping and polls instead, by default.
pub const DEFAULT_SPIN_NS: u64 = 200_000;
/// The loop spins only when its previous release is at least this long ago. Sparse packets (a ping, a
/// handshake, a low-rate flow) leave within microseconds of their time for little CPU; when releases come
/// back to back (a bulk transfer: 8,600 packets/s at 100 Mbit/s) spinning would hold a whole core, which on a
/// small machine the endpoints need, so the loop sleeps on its 1 µs-slack timer instead. A late wake-up then
/// delays packets by the timer's lateness (tens of µs) but never slows the link: the rate stage serves each
/// packet from the previous one's finish time, not from the moment it was handled.
pub const SPIN_AFTER_GAP_NS: u64 = NS_PER_MS;

impl Loop {
    fn run(mut self, sigfd: i32) -> io::Result<()> {
        let mut overflow = vec![0u8; 65536];
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
                let every = self.publish_interval();
                timeout = timeout.min((last_publish.plus_nanos(every)).nanos_since(now));
            }
            // Timer wake-ups are late by tens to hundreds of microseconds on a busy or virtualised host.
            // Sleep until spin_ns ahead of the deadline, then poll without sleeping, so packets leave within a
            // few microseconds of their release time - unless releases are coming back to back (SPIN_AFTER_GAP_NS).
            if now.nanos_since(self.last_release) >= SPIN_AFTER_GAP_NS {
                timeout = timeout.saturating_sub(self.spin_ns);
            }
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
                libc::pollfd {
                    fd: self.quit.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            ppoll(&mut fds, Some(timeout))?;
            if fds[2].revents != 0 {
                if self.index == 0 {
                    eprintln!("linkem: signal received, exiting");
                }
                return Ok(());
            }
            if fds[3].revents != 0 {
                return Ok(());
            }
            if fds[1].revents != 0 {
                self.waker.drain();
                self.apply_configs();
                dirty = true;
            }
            if fds[0].revents & libc::POLLIN != 0 {
                dirty |= self.read_packets(&mut overflow)?;
            }
            let now = monotonic_now();
            dirty |= self.write_packets(now);
            if dirty && now.nanos_since(last_publish) >= self.publish_interval() {
                let mut snap = self.link.snapshot(now);
                snap.write_errors_total = self.write_errors;
                *lock(self.shared.slot(self.index)) = snap;
                last_publish = now;
                dirty = false;
            }
        }
    }

    /// How often changed counters are published: often while idle, every 50 ms while packets are queued.
    fn publish_interval(&self) -> u64 {
        if self.pending.is_empty() && self.link.next_deadline().is_none() {
            PUBLISH_IDLE_NS
        } else {
            PUBLISH_EVERY_NS
        }
    }

    fn apply_configs(&mut self) {
        while let Ok(req) = self.rx.try_recv() {
            self.link.reconfigure(req.config.clone(), monotonic_now());
            *lock(&self.shared.config) = req.config.clone();
            let _ = req.applied.try_send(req.config);
        }
    }

    /// Read up to a batch of packets, straight into pool buffers; each is stamped when read.
    fn read_packets(&mut self, overflow: &mut [u8]) -> io::Result<bool> {
        let mut any = false;
        for _ in 0..READ_BATCH {
            let mut pkt = self.pool.take();
            match self.tun.read_into(&mut pkt, overflow) {
                Ok(_) => {}
                Err(e)
                    if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted =>
                {
                    self.pool.give(pkt);
                    break;
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("read {}: {e}", self.tun.name()),
                    ))
                }
            };
            any = true;
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

    /// Write every packet due at `now`; keep the rest on EAGAIN. (Packets that fall due while this runs
    /// leave on the next turn of the loop, which then does not sleep.)
    fn write_packets(&mut self, now: Time) -> bool {
        let mut any = false;
        loop {
            let pkt = match self.pending.pop_front() {
                Some(p) => p,
                None => match self.link.poll(now) {
                    Some(p) => p,
                    None => return any,
                },
            };
            any = true;
            self.last_release = now;
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
