//! The whole emulated link: two pipelines selected by destination prefix.
//! Packets matching neither prefix pass through at once, unshaped, and are
//! counted as direction "other". Unparseable packets are dropped and counted
//! as malformed.

use crate::cidr::Cidr;
use crate::config::Config;
use crate::packet::classify;
use crate::pipeline::Pipeline;
use crate::stats::{DirCounters, DirGauges, Direction, DropCause, Snapshot};
use crate::time::Time;
use std::collections::VecDeque;

/// Two shaped directions plus the pass-through.
#[derive(Debug)]
pub struct Link {
    downlink_net: Cidr,
    uplink_net: Cidr,
    down: Pipeline,
    up: Pipeline,
    passthrough: VecDeque<Vec<u8>>,
    other: DirCounters,
    malformed: u64,
    config: Config,
    applied: u64,
}

/// Outcome of [`Link::push`].
#[derive(Debug, PartialEq, Eq)]
pub enum LinkVerdict {
    /// Handed to the direction's pipeline (what it dropped comes out of
    /// [`Link::pop_drop`]).
    Accepted(Direction),
    /// Could not be parsed; buffer handed back.
    Malformed(Vec<u8>),
}

impl Link {
    /// Build with `config` applied at `now` (the config must be validated).
    pub fn new(downlink_net: Cidr, uplink_net: Cidr, config: Config, now: Time) -> Link {
        Link {
            downlink_net,
            uplink_net,
            down: Pipeline::for_path(&config.downlink, config.rtt_us(), config.seed, 1, now),
            up: Pipeline::for_path(&config.uplink, config.rtt_us(), config.seed, 2, now),
            passthrough: VecDeque::new(),
            other: DirCounters::default(),
            malformed: 0,
            config,
            applied: 1,
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Direction of a packet with destination `dst`.
    pub fn direction_of(&self, dst: &std::net::IpAddr) -> Direction {
        if self.downlink_net.contains(dst) {
            Direction::Downlink
        } else if self.uplink_net.contains(dst) {
            Direction::Uplink
        } else {
            Direction::Other
        }
    }

    /// Offer a raw packet arriving at `now`.
    pub fn push(&mut self, pkt: Vec<u8>, now: Time) -> LinkVerdict {
        let meta = match classify(&pkt) {
            Ok(m) => m,
            Err(_) => {
                self.malformed += 1;
                return LinkVerdict::Malformed(pkt);
            }
        };
        let proto = meta.protocol.class();
        let dir = self.direction_of(&meta.dst);
        let pipe = match dir {
            Direction::Downlink => &mut self.down,
            Direction::Uplink => &mut self.up,
            Direction::Other => {
                self.other.received(proto, pkt.len());
                self.other.delivered(proto, pkt.len());
                self.passthrough.push_back(pkt);
                return LinkVerdict::Accepted(dir);
            }
        };
        pipe.push(pkt, proto, now);
        LinkVerdict::Accepted(dir)
    }

    /// A packet either pipeline dropped: its direction, cause and buffer.
    pub fn pop_drop(&mut self) -> Option<(Direction, DropCause, Vec<u8>)> {
        if let Some((c, b)) = self.down.pop_drop() {
            return Some((Direction::Downlink, c, b));
        }
        self.up.pop_drop().map(|(c, b)| (Direction::Uplink, c, b))
    }

    /// Next packet due at `now` (pass-through first, then downlink, uplink).
    pub fn poll(&mut self, now: Time) -> Option<Vec<u8>> {
        if let Some(p) = self.passthrough.pop_front() {
            return Some(p);
        }
        self.down.poll(now).or_else(|| self.up.poll(now))
    }

    /// Earliest time at which `poll` may return something new.
    pub fn next_deadline(&self) -> Option<Time> {
        if !self.passthrough.is_empty() {
            return Some(Time::ZERO);
        }
        match (self.down.next_deadline(), self.up.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Swap the configuration at `at` (one instant for both directions)
    /// without losing queued packets (`Pipeline::reconfigure`).
    pub fn reconfigure(&mut self, config: Config, at: Time) {
        let (rtt, seed, keep) = (config.rtt_us(), config.seed, config.keep_state);
        self.down.reconfigure(&config.downlink, rtt, seed, keep, at);
        self.up.reconfigure(&config.uplink, rtt, seed, keep, at);
        self.config = config;
        self.applied += 1;
    }

    pub fn pipeline(&self, dir: Direction) -> Option<&Pipeline> {
        match dir {
            Direction::Downlink => Some(&self.down),
            Direction::Uplink => Some(&self.up),
            Direction::Other => None,
        }
    }

    /// Counters and gauges at `now`.
    pub fn snapshot(&self, now: Time) -> Snapshot {
        Snapshot {
            counters: [*self.down.counters(), *self.up.counters(), self.other],
            gauges: [
                self.down.gauges(now),
                self.up.gauges(now),
                DirGauges::default(),
            ],
            config_applied_total: self.applied,
            malformed_packets_total: self.malformed,
            write_errors_total: 0,
            read_wait: Default::default(),
        }
    }
}
