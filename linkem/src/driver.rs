//! The real-time loop: TUN <-> [`Link`], control requests, signals.

use crate::cidr::Cidr;
use crate::config::Config;
use crate::control::{self, ConfigRequest, LoopHandle, Shared};
use crate::link::Link;
use crate::stats::{Direction, DropCause};
use crate::sys::{monotonic_now, ppoll, set_timer_slack, termination_signalfd, Waker};
use crate::time::{Time, NS_PER_MS};
use crate::tun::Tun;
use crate::turn::{sleep_for, Clock, Device, Turner};
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
    /// [`crate::turn::SPIN_AFTER_GAP_NS`]).
    pub spin_ns: u64,
    /// `--napi`: attach with `IFF_NAPI` and make the devices' NAPI threaded (see [`Tun::open`]).
    pub napi: bool,
}

const PUBLISH_EVERY_NS: u64 = 50 * NS_PER_MS;
/// While nothing is queued, counters are published this soon after they change, so a reader that asks right
/// after a transfer ended (the sweep runner, for the wire bytes of the run) sees all of it.
const PUBLISH_IDLE_NS: u64 = 2 * NS_PER_MS;
const IDLE_TIMEOUT_NS: u64 = 1_000 * NS_PER_MS;
/// While the loop is busy (never sleeping), it looks at signals this often.
const BUSY_CHECK_NS: u64 = NS_PER_MS;

pub use crate::turn::DEFAULT_SPIN_NS;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn open_tun(name: &str, napi: bool) -> io::Result<Tun> {
    let tun = Tun::open(name, napi)?;
    if let Err(e) = tun.set_up() {
        eprintln!("linkem: warning: could not set {} up: {e}", tun.name());
    }
    if napi {
        if let Err(e) = tun.set_threaded_napi() {
            eprintln!(
                "linkem: warning: {}: NAPI not threaded ({e}): the forwarding stays in linkem's writes",
                tun.name()
            );
        }
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
    let mut tuns = vec![open_tun(&opts.tun, opts.napi)?];
    if let Some(up) = &opts.tun_up {
        tuns.push(open_tun(up, opts.napi)?);
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
    let dual = tuns.len() > 1;
    for (index, tun) in tuns.into_iter().enumerate() {
        let waker = Arc::new(Waker::new()?);
        // With one device per direction the routing decides what each carries (docs: "Deployment").
        let direction = match (dual, index) {
            (true, 0) => Direction::Downlink,
            (true, _) => Direction::Uplink,
            (false, _) => Direction::Other,
        };
        let tun_drops = TunDrops::new(tun.name());
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
            turner: Turner::new(),
            spin_ns: opts.spin_ns,
            direction,
            tun_drops,
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

/// The kernel's count of packets dropped because the device's queue was full (`tx_dropped` of a TUN device:
/// the ring linkem reads from overflowed), from when linkem attached.
struct TunDrops {
    path: String,
    base: u64,
}

impl TunDrops {
    fn new(name: &str) -> TunDrops {
        let path = format!("/sys/class/net/{name}/statistics/tx_dropped");
        let base = read_counter(&path).unwrap_or(0);
        TunDrops { path, base }
    }
    fn since_start(&self) -> u64 {
        read_counter(&self.path).map_or(0, |v| v.saturating_sub(self.base))
    }
}

fn read_counter(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The TUN device as the turn logic sees it.
struct TunDevice<'a> {
    tun: &'a Tun,
    overflow: &'a mut [u8],
}

impl Device for TunDevice<'_> {
    fn read(&mut self, buf: &mut Vec<u8>) -> io::Result<bool> {
        match self.tun.read_into(buf, self.overflow) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                Ok(false)
            }
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("read {}: {e}", self.tun.name()),
            )),
        }
    }
    fn write(&mut self, pkt: &[u8]) -> io::Result<bool> {
        match self.tun.write(pkt) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }
}

struct Monotonic;

impl Clock for Monotonic {
    fn now(&mut self) -> Time {
        monotonic_now()
    }
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
    turner: Turner,
    spin_ns: u64,
    /// The direction this device carries (its TUN-queue drops are counted there).
    direction: Direction,
    tun_drops: TunDrops,
}

enum Wake {
    Run,
    Exit,
}

impl Loop {
    fn run(mut self, sigfd: i32) -> io::Result<()> {
        let mut overflow = vec![0u8; 65536];
        let mut last_publish = Time::ZERO;
        let mut last_check = Time::ZERO;
        let mut dirty = true;
        loop {
            let mut dev = TunDevice {
                tun: &self.tun,
                overflow: &mut overflow,
            };
            let r = self.turner.turn(&mut self.link, &mut dev, &mut Monotonic)?;
            dirty |= r.read + r.written > 0;
            dirty |= self.apply_configs();
            let now = monotonic_now();
            if r.idle() || r.blocked {
                let mut timeout = sleep_for(
                    self.link.next_deadline(),
                    now,
                    self.turner.last_release,
                    self.spin_ns,
                )
                .unwrap_or(IDLE_TIMEOUT_NS);
                if dirty {
                    timeout = timeout.min(
                        last_publish
                            .plus_nanos(self.publish_interval())
                            .nanos_since(now),
                    );
                }
                if let Wake::Exit = self.wait(sigfd, Some(timeout), r.blocked)? {
                    return Ok(());
                }
                last_check = monotonic_now();
                self.turner.woke(last_check);
            } else if now.nanos_since(last_check) >= BUSY_CHECK_NS {
                if let Wake::Exit = self.wait(sigfd, Some(0), false)? {
                    return Ok(());
                }
                last_check = now;
            }
            let now = monotonic_now();
            if dirty && now.nanos_since(last_publish) >= self.publish_interval() {
                self.publish(now);
                last_publish = now;
                dirty = false;
            }
        }
    }

    /// ppoll the device (for a packet, or for room after EAGAIN), the config waker, signals and the quit
    /// waker; `Exit` when the loop must end.
    fn wait(&mut self, sigfd: i32, timeout: Option<u64>, want_out: bool) -> io::Result<Wake> {
        let tun_events = libc::POLLIN | if want_out { libc::POLLOUT } else { 0 };
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
        ppoll(&mut fds, timeout)?;
        if fds[2].revents != 0 {
            if self.index == 0 {
                eprintln!("linkem: signal received, exiting");
            }
            return Ok(Wake::Exit);
        }
        if fds[3].revents != 0 {
            return Ok(Wake::Exit);
        }
        if fds[1].revents != 0 {
            self.waker.drain();
        }
        Ok(Wake::Run)
    }

    /// How often changed counters are published: often while idle, every 50 ms while packets are queued.
    fn publish_interval(&self) -> u64 {
        if !self.turner.has_pending() && self.link.next_deadline().is_none() {
            PUBLISH_IDLE_NS
        } else {
            PUBLISH_EVERY_NS
        }
    }

    fn publish(&mut self, now: Time) {
        let mut snap = self.link.snapshot(now);
        snap.write_errors_total = self.turner.write_errors;
        let d = Direction::ALL
            .iter()
            .position(|&x| x == self.direction)
            .unwrap_or(2);
        snap.counters[d].drops[DropCause::TunQueue as usize] += self.tun_drops.since_start();
        snap.read_wait = self.turner.read_wait;
        *lock(self.shared.slot(self.index)) = snap;
    }

    /// Apply every configuration the control thread sent; `true` if any.
    fn apply_configs(&mut self) -> bool {
        let mut any = false;
        while let Ok(req) = self.rx.try_recv() {
            // One instant for both directions of a change (stamped by the control thread), even when they live in
            // different loops.
            self.link.reconfigure(req.config.clone(), req.at);
            *lock(&self.shared.config) = req.config.clone();
            let _ = req.applied.try_send(req.config);
            any = true;
        }
        any
    }
}
