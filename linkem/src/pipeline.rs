//! One direction of the emulated link:
//! outage -> loss -> drop-tail queue + link server (rate) -> delay/jitter.
//!
//! Sans-IO: every call takes `now`; nothing here reads a clock. The
//! serializer is advanced lazily (on `push` and `poll`), and completion
//! times are exact regardless of when the driver calls in.

use crate::config::DirectionConfig;
use crate::delay::{DelayLine, DelayParams};
use crate::loss::Loss;
use crate::outage::Outage;
use crate::packet::ProtoClass;
use crate::queue::{ByteLen, Queue};
use crate::rate::{build_server, LinkServer};
use crate::rng::Rng;
use crate::stats::{DirCounters, DirGauges, DropCause};
use crate::time::{Time, NS_PER_SEC};

const SALT_LOSS: u64 = 1;
const SALT_JITTER: u64 = 2;

/// What happened to a pushed packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Queued; it will come out of `poll`.
    Accepted,
    /// Dropped; the buffer is handed back for reuse.
    Dropped(DropCause, Vec<u8>),
}

/// A packet waiting in the bottleneck queue.
#[derive(Debug)]
struct Queued {
    pkt: Vec<u8>,
    arrival: Time,
    delay_ns: u64,
    proto: ProtoClass,
}

impl ByteLen for Queued {
    fn size(&self) -> usize {
        self.pkt.len()
    }
}

/// One direction's pipeline.
#[derive(Debug)]
pub struct Pipeline {
    cfg: DirectionConfig,
    seed: u64,
    salt: u64,
    outage: Outage,
    loss: Loss,
    jitter_rng: Rng,
    queue: Queue<Queued>,
    server: Box<dyn LinkServer>,
    /// Completion time of the packet at the head of the queue, if serializing.
    head_finish: Option<Time>,
    busy_until: Time,
    params: DelayParams,
    delay: DelayLine,
    counters: DirCounters,
}

impl Pipeline {
    /// `salt` separates the random streams of different directions.
    pub fn new(cfg: &DirectionConfig, seed: u64, salt: u64, now: Time) -> Pipeline {
        Pipeline {
            cfg: cfg.clone(),
            seed,
            salt,
            outage: Outage::new(cfg.outages.as_ref(), now),
            loss: Loss::new(&cfg.loss, Rng::for_stage(seed, salt * 16 + SALT_LOSS)),
            jitter_rng: Rng::for_stage(seed, salt * 16 + SALT_JITTER),
            queue: Queue::new(cfg.queue_limits()),
            server: build_server(cfg, now),
            head_finish: None,
            busy_until: now,
            params: DelayParams::from_config(cfg),
            delay: DelayLine::new(cfg.reorder),
            counters: DirCounters::default(),
        }
    }

    pub fn config(&self) -> &DirectionConfig {
        &self.cfg
    }

    /// Offer a packet arriving at `now`.
    pub fn push(&mut self, pkt: Vec<u8>, proto: ProtoClass, now: Time) -> Verdict {
        self.advance(now);
        self.counters.received(proto, pkt.len());
        let cause = if self.outage.is_down(now) {
            Some(DropCause::Outage)
        } else if self.loss.lose() {
            Some(DropCause::Loss)
        } else if !self.queue.admits(pkt.len()) {
            Some(DropCause::Queue)
        } else {
            None
        };
        if let Some(c) = cause {
            self.counters.dropped(c);
            return Verdict::Dropped(c, pkt);
        }
        let delay_ns = self.params.sample(&mut self.jitter_rng);
        self.queue.push(Queued {
            pkt,
            arrival: now,
            delay_ns,
            proto,
        });
        if self.head_finish.is_none() {
            self.start_head();
        }
        self.advance(now);
        Verdict::Accepted
    }

    /// The next packet whose release time is <= `now`, in release order.
    pub fn poll(&mut self, now: Time) -> Option<Vec<u8>> {
        self.advance(now);
        let d = self.delay.pop_due(now)?;
        self.counters.delivered(d.proto, d.pkt.len());
        Some(d.pkt)
    }

    /// When `poll` should next be called (None = nothing pending).
    pub fn next_deadline(&self) -> Option<Time> {
        let line = self.delay.next_release();
        let head = match (self.head_finish, self.queue.front()) {
            (Some(f), Some(h)) => {
                if self.params.reorder && self.queue.len() > 1 {
                    // A later packet may overtake: wake when the next one starts.
                    Some(f)
                } else {
                    Some(self.delay.release_time(f, h.delay_ns))
                }
            }
            _ => None,
        };
        match (line, head) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Apply a new configuration at `now`. Queued and delayed packets are
    /// kept; the packet being serialized keeps its completion time. Loss,
    /// delay and jitter apply to packets arriving from now on; queued packets
    /// are served at the new rate; schedules, outages and the random streams restart at `now`.
    pub fn reconfigure(&mut self, cfg: &DirectionConfig, seed: u64, now: Time) {
        self.advance(now);
        // Every applied configuration restarts the random streams (and the Gilbert-Elliott chain, in its
        // good state) from the seed: the same config + the same packet sequence after it = the same drops and
        // delays, which is what makes paired runs comparable.
        self.seed = seed;
        self.loss = Loss::new(&cfg.loss, Rng::for_stage(seed, self.salt * 16 + SALT_LOSS));
        self.jitter_rng = Rng::for_stage(seed, self.salt * 16 + SALT_JITTER);
        self.outage = Outage::new(cfg.outages.as_ref(), now);
        self.server = build_server(cfg, now);
        self.busy_until = self.busy_until.max(now);
        self.queue.set_limits(cfg.queue_limits());
        self.params = DelayParams::from_config(cfg);
        self.delay.set_reorder(cfg.reorder);
        self.cfg = cfg.clone();
    }

    pub fn counters(&self) -> &DirCounters {
        &self.counters
    }

    pub fn gauges(&self, now: Time) -> DirGauges {
        DirGauges {
            queue_packets: self.queue.len() as u64,
            queue_bytes: self.queue.bytes(),
            delay_line_packets: self.delay.len() as u64,
            rate_bps: self.server.rate_at(now),
            delay_seconds: self.params.delay_ns as f64 / NS_PER_SEC as f64,
            jitter_seconds: self.params.jitter_ns as f64 / NS_PER_SEC as f64,
            loss_ratio: self.cfg.loss.mean_loss(),
        }
    }

    /// Packets in the queue (including the one serializing) and delay line.
    pub fn in_flight(&self) -> usize {
        self.queue.len() + self.delay.len()
    }

    /// Move every packet whose serialization finished by `now` into the
    /// delay line, starting the next one each time.
    fn advance(&mut self, now: Time) {
        while let Some(f) = self.head_finish {
            if f > now {
                break;
            }
            self.head_finish = None;
            self.busy_until = f;
            if let Some(q) = self.queue.pop() {
                self.delay.insert(f, q.delay_ns, q.proto, q.pkt);
            }
            self.start_head();
        }
    }

    fn start_head(&mut self) {
        if let Some(h) = self.queue.front() {
            let start = self.busy_until.max(h.arrival);
            let finish = self.server.finish(start, h.pkt.len());
            self.head_finish = Some(finish);
        }
    }
}
