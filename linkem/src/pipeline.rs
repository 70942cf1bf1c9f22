//! One direction of the emulated link:
//!
//! ```text
//! outage -> duplicate -> loss -> corrupt -> reorder pick -> queue discipline
//!   -> link server (rate/schedule/trace, overhead/mpu) -> loss after the link
//!   -> delay (process in time, or per packet) -> slots -> out
//! ```
//!
//! Sans-IO: every call takes `now`; nothing here reads a clock. The link is
//! an event machine advanced lazily (on `push` and `poll`): the end of a
//! packet's service, the link taking the next packet from the queue
//! discipline, and the discipline's own timer (PIE) are processed in time
//! order, so the outcome is exact whenever the driver calls in.

use crate::config::DirectionConfig;
use crate::delay::DelayStage;
use crate::ecn;
use crate::impair::{self, Reorder};
use crate::loss::Loss;
use crate::outage::Outage;
use crate::packet::ProtoClass;
use crate::pkt::Pkt;
use crate::qdisc::{self, InService, Limits, QdiscEvents, QueueDiscipline};
use crate::rng::Rng;
use crate::server::{build_server, LinkServer};
use crate::slot::SlotStage;
use crate::stats::{DirCounters, DirGauges, DropCause};
use crate::time::{Time, NS_PER_SEC};
use std::collections::VecDeque;

/// Random streams, one per stage, so one stage's draws do not shift another's.
#[derive(Debug, Clone)]
struct Streams {
    jitter: Rng,
    duplicate: Rng,
    corrupt: Rng,
    reorder: Rng,
    slot: Rng,
}

const SALT_LOSS: u64 = 1;
const SALT_JITTER: u64 = 2;
const SALT_LOSS_AFTER: u64 = 3;
const SALT_DUPLICATE: u64 = 4;
const SALT_CORRUPT: u64 = 5;
const SALT_REORDER: u64 = 6;
const SALT_SLOT: u64 = 7;
const SALT_QDISC: u64 = 8;

fn stream(seed: u64, salt: u64, stage: u64) -> Rng {
    Rng::for_stage(seed, salt * 16 + stage)
}

impl Streams {
    fn new(seed: u64, salt: u64) -> Streams {
        Streams {
            jitter: stream(seed, salt, SALT_JITTER),
            duplicate: stream(seed, salt, SALT_DUPLICATE),
            corrupt: stream(seed, salt, SALT_CORRUPT),
            reorder: stream(seed, salt, SALT_REORDER),
            slot: stream(seed, salt, SALT_SLOT),
        }
    }
}

/// The packet on the link.
#[derive(Debug)]
struct OnLink {
    pkt: Pkt,
    finish: Time,
    /// `None`: lost after the link.
    release: Option<Time>,
}

/// One direction's pipeline.
#[derive(Debug)]
pub struct Pipeline {
    cfg: DirectionConfig,
    salt: u64,
    streams: Streams,
    outage: Outage,
    loss: Loss,
    loss_after: Loss,
    reorder: Reorder,
    qdisc: Box<dyn QueueDiscipline>,
    server: Box<dyn LinkServer>,
    on_link: Option<OnLink>,
    /// When the link takes the next packet from the queue discipline.
    dequeue_at: Option<Time>,
    delay: DelayStage,
    slots: SlotStage,
    counters: DirCounters,
    events: QdiscEvents,
    drops: VecDeque<(DropCause, Vec<u8>)>,
}

impl Pipeline {
    /// A pipeline whose default queue is sized for an RTT of twice this
    /// direction's delay. `salt` separates the random streams of directions.
    pub fn new(cfg: &DirectionConfig, seed: u64, salt: u64, now: Time) -> Pipeline {
        Pipeline::for_path(cfg, cfg.delay_us.saturating_mul(2), seed, salt, now)
    }

    /// A pipeline on a path with round-trip time `rtt_us` (default queue size).
    pub fn for_path(
        cfg: &DirectionConfig,
        rtt_us: u64,
        seed: u64,
        salt: u64,
        now: Time,
    ) -> Pipeline {
        let mut streams = Streams::new(seed, salt);
        let limits = Limits::new(cfg.queue_limits_for_rtt(rtt_us));
        Pipeline {
            cfg: cfg.clone(),
            salt,
            outage: Outage::new(cfg.outages.as_ref(), now),
            loss: Loss::new(&cfg.loss, stream(seed, salt, SALT_LOSS)),
            loss_after: Loss::new(&cfg.loss_after, stream(seed, salt, SALT_LOSS_AFTER)),
            reorder: Reorder::new(cfg.reorder_prob, cfg.reorder_gap),
            qdisc: qdisc::build(&cfg.qdisc, limits, now, stream(seed, salt, SALT_QDISC)),
            server: build_server(cfg, now),
            on_link: None,
            dequeue_at: None,
            delay: DelayStage::new(cfg, now, &mut streams.jitter),
            slots: SlotStage::new(cfg.slot.as_ref(), now),
            streams,
            counters: DirCounters::default(),
            events: QdiscEvents::default(),
            drops: VecDeque::new(),
        }
    }

    pub fn config(&self) -> &DirectionConfig {
        &self.cfg
    }

    /// Offer a packet arriving at `now`. Whatever is dropped (it, or others
    /// the queue discipline chose) comes out of [`Pipeline::pop_drop`].
    pub fn push(&mut self, buf: Vec<u8>, proto: ProtoClass, now: Time) {
        self.advance(now);
        self.counters.received(proto, buf.len());
        if self.outage.is_down(now) {
            self.drop(DropCause::Outage, buf);
            return;
        }
        let duplicate =
            self.cfg.duplicate > 0.0 && self.streams.duplicate.chance(self.cfg.duplicate);
        self.admit(buf, proto, now, duplicate);
        self.advance(now);
    }

    /// netem's order: a duplicate is made unless the loss event takes one of
    /// the two copies; the copy then goes through loss, corruption and
    /// reordering on its own (as netem re-enqueues it at the root).
    fn admit(&mut self, mut buf: Vec<u8>, proto: ProtoClass, now: Time, duplicate: bool) {
        let mut copies = 1 + u32::from(duplicate);
        if self.loss.lose() {
            if self.cfg.loss_ecn && ecn::set_ce(&mut buf) {
                self.counters.ecn_marked += 1;
            } else {
                copies -= 1;
            }
        }
        if copies == 0 {
            self.drop(DropCause::Loss, buf);
            return;
        }
        let copy = (copies > 1).then(|| {
            let mut c = Vec::with_capacity(buf.capacity().max(buf.len()));
            c.extend_from_slice(&buf);
            c
        });
        if self.cfg.corrupt > 0.0 && self.streams.corrupt.chance(self.cfg.corrupt) {
            impair::corrupt(&mut buf, &mut self.streams.corrupt);
            self.counters.corrupted += 1;
        }
        let mut pkt = Pkt::new(buf, proto, now);
        pkt.skip_delay = self.reorder.skip_delay(&mut self.streams.reorder);
        let in_service = InService(self.on_link.as_ref().map(|o| o.pkt.len()));
        self.qdisc.enqueue(pkt, now, in_service, &mut self.events);
        self.collect_events();
        if self.on_link.is_none() && self.dequeue_at.is_none() && !self.qdisc.is_empty() {
            self.dequeue_at = Some(self.server.earliest_start(now, true));
        }
        if let Some(c) = copy {
            self.counters.duplicated += 1;
            self.admit(c, proto, now, false);
        }
    }

    /// The next packet whose time has come at `now`, in release order.
    pub fn poll(&mut self, now: Time) -> Option<Vec<u8>> {
        self.advance(now);
        let pkt = if self.slots.in_use() {
            while let Some((release, p)) = self.delay.pop_due(now) {
                self.slots.insert(release, p, &mut self.streams.slot);
            }
            self.slots.pop_due(now)?
        } else {
            self.delay.pop_due(now)?.1
        };
        self.counters.delivered(pkt.proto, pkt.len());
        Some(pkt.buf)
    }

    /// A dropped packet's cause and buffer (for counting and reuse).
    pub fn pop_drop(&mut self) -> Option<(DropCause, Vec<u8>)> {
        self.drops.pop_front()
    }

    /// No time after `now` at which `poll` could return something is earlier
    /// than this (None = nothing pending).
    pub fn next_deadline(&self) -> Option<Time> {
        let may_overtake = self.cfg.reorder || self.cfg.reorder_prob > 0.0;
        let link = self.on_link.as_ref().map(|o| match o.release {
            Some(r) if !may_overtake || self.qdisc.is_empty() => r,
            _ => o.finish,
        });
        [
            self.delay.next_release(),
            self.slots.next_release(),
            link,
            self.dequeue_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Apply a new configuration at `at`. Queued and delayed packets are
    /// kept; the packet on the link keeps its departure and release times;
    /// queued packets are served at the new rate; schedules, outages, slots
    /// and the delay process restart at `at`. Without `keep_state` every
    /// random stream restarts from `seed` (and the queue discipline's state,
    /// the Gilbert-Elliott chains and the reorder count from scratch); with
    /// it they continue, with the new parameters.
    pub fn reconfigure(
        &mut self,
        cfg: &DirectionConfig,
        rtt_us: u64,
        seed: u64,
        keep_state: bool,
        at: Time,
    ) {
        self.advance(at);
        let limits = Limits::new(cfg.queue_limits_for_rtt(rtt_us));
        if keep_state {
            self.loss.reconfigure(&cfg.loss);
            self.loss_after.reconfigure(&cfg.loss_after);
            self.reorder.set(cfg.reorder_prob, cfg.reorder_gap);
        } else {
            self.streams = Streams::new(seed, self.salt);
            self.loss = Loss::new(&cfg.loss, stream(seed, self.salt, SALT_LOSS));
            self.loss_after = Loss::new(&cfg.loss_after, stream(seed, self.salt, SALT_LOSS_AFTER));
            self.reorder = Reorder::new(cfg.reorder_prob, cfg.reorder_gap);
        }
        if keep_state && self.qdisc.reconfigure(&cfg.qdisc) {
            self.qdisc.set_limits(limits);
        } else {
            let waiting = self.qdisc.drain();
            let rng = stream(seed, self.salt, SALT_QDISC);
            self.qdisc = qdisc::build(&cfg.qdisc, limits, at, rng);
            for p in waiting {
                self.qdisc.restore(p);
            }
        }
        self.outage = Outage::new(cfg.outages.as_ref(), at);
        self.server = build_server(cfg, at);
        if self.dequeue_at.is_some() {
            self.dequeue_at = Some(self.server.earliest_start(at, false));
        }
        self.delay.reconfigure(cfg, at, &mut self.streams.jitter);
        self.slots.reconfigure(cfg.slot.as_ref(), at);
        self.cfg = cfg.clone();
        self.advance(at);
    }

    pub fn counters(&self) -> &DirCounters {
        &self.counters
    }

    pub fn gauges(&self, now: Time) -> DirGauges {
        let on_link = InService(self.on_link.as_ref().map(|o| o.pkt.len()));
        DirGauges {
            queue_packets: (self.qdisc.len() + on_link.count()) as u64,
            queue_bytes: self.qdisc.bytes() + on_link.bytes(),
            delay_line_packets: (self.delay.len() + self.slots.len()) as u64,
            rate_bps: self.server.rate_at(now),
            delay_seconds: self.cfg.delay_us as f64 * 1e3 / NS_PER_SEC as f64,
            jitter_seconds: self.cfg.jitter_us as f64 * 1e3 / NS_PER_SEC as f64,
            loss_ratio: self.cfg.loss.mean_loss(),
        }
    }

    /// Packets in the queue discipline, on the link, in the delay line and
    /// waiting for a slot.
    pub fn in_flight(&self) -> usize {
        self.qdisc.len() + usize::from(self.on_link.is_some()) + self.delay.len() + self.slots.len()
    }

    fn drop(&mut self, cause: DropCause, buf: Vec<u8>) {
        self.counters.dropped(cause);
        self.drops.push_back((cause, buf));
    }

    fn collect_events(&mut self) {
        self.counters.ecn_marked += std::mem::take(&mut self.events.ecn_marks);
        for (cause, p) in std::mem::take(&mut self.events.drops) {
            self.counters.dropped(cause);
            self.drops.push_back((cause, p.buf));
        }
    }

    /// Process every event up to `now`, in time order: the end of the
    /// service on the link, the queue discipline's timer, the link taking
    /// the next packet.
    fn advance(&mut self, now: Time) {
        loop {
            let finish = self.on_link.as_ref().map(|o| o.finish);
            let timer = self.qdisc.next_timer();
            let next = [finish, timer, self.dequeue_at].into_iter().flatten().min();
            let Some(t) = next.filter(|&t| t <= now) else {
                return;
            };
            if finish == Some(t) {
                self.depart();
            } else if timer == Some(t) {
                self.qdisc.on_timer(t);
            } else {
                self.dequeue_at = None;
                let next = self.qdisc.dequeue(t, &mut self.events);
                self.collect_events();
                if let Some(p) = next {
                    self.serve(p, t);
                }
            }
        }
    }

    /// Put `pkt` on the link at `start`; its fate after the link and its
    /// release time are decided now, in departure order.
    fn serve(&mut self, pkt: Pkt, start: Time) {
        let finish = self.server.finish(start, self.cfg.wire_len(pkt.len()));
        let release = if self.loss_after.lose() {
            None
        } else {
            Some(
                self.delay
                    .release_for(finish, pkt.skip_delay, &mut self.streams.jitter),
            )
        };
        self.on_link = Some(OnLink {
            pkt,
            finish,
            release,
        });
    }

    /// The packet on the link has been sent.
    fn depart(&mut self) {
        let Some(o) = self.on_link.take() else { return };
        match o.release {
            Some(r) => self.delay.insert(r, o.pkt),
            None => self.drop(DropCause::LossAfter, o.pkt.buf),
        }
        if !self.qdisc.is_empty() {
            self.dequeue_at = Some(self.server.earliest_start(o.finish, false));
        }
    }
}
