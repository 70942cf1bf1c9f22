//! CoDel (RFC 8289), as Linux implements it (`include/net/codel_impl.h`):
//! the state machine is shared with fq_codel, which runs one per flow.
//!
//! At dequeue, a packet's sojourn time is `now - arrival`. Once the sojourn
//! time has stayed at or above `target` for `interval` (and more than one
//! MTU is queued), CoDel enters the dropping state and drops (or, with ECN,
//! marks) one packet, then the next ones at `interval / sqrt(count)` after
//! each other, until the sojourn time falls below `target`. Re-entering soon
//! after leaving resumes near the previous drop rate. The square root is
//! exact here (Linux uses a Newton step on a fixed-point inverse).

use super::{Fifo, InService, Limits, QdiscEvents, QueueDiscipline, MTU};
use crate::config::QdiscConfig;
use crate::ecn;
use crate::pkt::Pkt;
use crate::stats::DropCause;
use crate::time::{Time, NS_PER_US};

/// CoDel's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodelParams {
    pub target_ns: u64,
    pub interval_ns: u64,
    pub ecn: bool,
}

impl CodelParams {
    pub fn new(target_us: u64, interval_us: u64, ecn: bool) -> CodelParams {
        CodelParams {
            target_ns: target_us.saturating_mul(NS_PER_US),
            interval_ns: interval_us.saturating_mul(NS_PER_US),
            ecn,
        }
    }
}

/// CoDel's state (per queue).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodelVars {
    pub count: u32,
    pub lastcount: u32,
    pub dropping: bool,
    pub first_above_time: Option<Time>,
    pub drop_next: Time,
    /// Sojourn time of the last packet looked at.
    pub ldelay: u64,
}

/// Where CoDel takes packets from.
pub trait CodelSource {
    fn pop(&mut self) -> Option<Pkt>;
    /// Bytes queued after the last pop (Linux: the whole qdisc's backlog).
    fn backlog(&self) -> u64;
}

impl CodelSource for Fifo {
    fn pop(&mut self) -> Option<Pkt> {
        Fifo::pop(self)
    }
    fn backlog(&self) -> u64 {
        QueueDiscipline::bytes(self)
    }
}

/// `t + interval / sqrt(count)`.
pub fn control_law(t: Time, interval_ns: u64, count: u32) -> Time {
    let step = interval_ns as f64 / f64::from(count.max(1)).sqrt();
    t.plus_nanos(step as u64)
}

fn should_drop(
    pkt: Option<&Pkt>,
    now: Time,
    backlog: u64,
    p: &CodelParams,
    v: &mut CodelVars,
) -> bool {
    let Some(pkt) = pkt else {
        v.first_above_time = None;
        return false;
    };
    v.ldelay = now.nanos_since(pkt.arrival);
    if v.ldelay < p.target_ns || backlog <= MTU {
        // Went below: stay below for at least an interval.
        v.first_above_time = None;
        return false;
    }
    match v.first_above_time {
        None => {
            v.first_above_time = Some(now.plus_nanos(p.interval_ns));
            false
        }
        Some(f) => now > f,
    }
}

/// Drop or mark `pkt` (CoDel's verdict); `Some` if it was marked and stays.
fn drop_or_mark(mut pkt: Pkt, p: &CodelParams, ev: &mut QdiscEvents) -> Option<Pkt> {
    if p.ecn && ecn::set_ce(&mut pkt.buf) {
        ev.ecn_marks += 1;
        Some(pkt)
    } else {
        ev.drop(DropCause::Aqm, pkt);
        None
    }
}

/// CoDel's dequeue (Linux `codel_dequeue`).
pub fn dequeue(
    src: &mut dyn CodelSource,
    p: &CodelParams,
    v: &mut CodelVars,
    now: Time,
    ev: &mut QdiscEvents,
) -> Option<Pkt> {
    let mut pkt = src.pop();
    if pkt.is_none() {
        v.dropping = false;
        return None;
    }
    let drop = should_drop(pkt.as_ref(), now, src.backlog(), p, v);
    if v.dropping {
        if !drop {
            v.dropping = false;
        } else if now >= v.drop_next {
            while v.dropping && now >= v.drop_next {
                v.count = v.count.wrapping_add(1);
                let cur = pkt.take()?;
                if let Some(marked) = drop_or_mark(cur, p, ev) {
                    v.drop_next = control_law(v.drop_next, p.interval_ns, v.count);
                    return Some(marked);
                }
                pkt = src.pop();
                if should_drop(pkt.as_ref(), now, src.backlog(), p, v) {
                    v.drop_next = control_law(v.drop_next, p.interval_ns, v.count);
                } else {
                    v.dropping = false;
                }
            }
        }
    } else if drop {
        let cur = pkt.take()?;
        pkt = drop_or_mark(cur, p, ev);
        if pkt.is_none() {
            pkt = src.pop();
            // Linux evaluates the next packet here only for its side effects.
            should_drop(pkt.as_ref(), now, src.backlog(), p, v);
        }
        v.dropping = true;
        // If we went above target soon after leaving the dropping state, the
        // drop rate that controlled the queue then is a good start now.
        let delta = v.count.wrapping_sub(v.lastcount);
        let since = i128::from(now.as_nanos()) - i128::from(v.drop_next.as_nanos());
        v.count = if delta > 1 && since < 16 * i128::from(p.interval_ns) {
            delta
        } else {
            1
        };
        v.lastcount = v.count;
        v.drop_next = control_law(now, p.interval_ns, v.count);
    }
    pkt
}

/// CoDel on one FIFO (Linux `sch_codel`): an arriving packet that does not
/// fit the limits is dropped at the tail.
#[derive(Debug)]
pub struct Codel {
    fifo: Fifo,
    params: CodelParams,
    vars: CodelVars,
}

fn params_of(cfg: &QdiscConfig) -> Option<CodelParams> {
    match *cfg {
        QdiscConfig::Codel {
            target_us,
            interval_us,
            ecn,
        } => Some(CodelParams::new(target_us, interval_us, ecn)),
        _ => None,
    }
}

impl Codel {
    pub fn new(cfg: &QdiscConfig, limits: Limits) -> Codel {
        Codel {
            fifo: Fifo::new(limits, false),
            params: params_of(cfg).unwrap_or(CodelParams::new(5_000, 100_000, false)),
            vars: CodelVars::default(),
        }
    }

    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }
}

impl QueueDiscipline for Codel {
    fn enqueue(&mut self, pkt: Pkt, now: Time, s: InService, ev: &mut QdiscEvents) {
        self.fifo.enqueue(pkt, now, s, ev);
    }
    fn dequeue(&mut self, now: Time, ev: &mut QdiscEvents) -> Option<Pkt> {
        dequeue(&mut self.fifo, &self.params, &mut self.vars, now, ev)
    }
    fn len(&self) -> usize {
        self.fifo.len()
    }
    fn bytes(&self) -> u64 {
        QueueDiscipline::bytes(&self.fifo)
    }
    fn set_limits(&mut self, limits: Limits) {
        self.fifo.set_limits(limits);
    }
    fn reconfigure(&mut self, cfg: &QdiscConfig) -> bool {
        match params_of(cfg) {
            Some(p) => {
                self.params = p;
                true
            }
            None => false,
        }
    }
    fn drain(&mut self) -> Vec<Pkt> {
        self.fifo.drain()
    }
    fn restore(&mut self, pkt: Pkt) {
        self.fifo.restore(pkt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_law_is_interval_over_sqrt_count() {
        assert_eq!(control_law(Time(0), 100_000_000, 1), Time(100_000_000));
        assert_eq!(control_law(Time(0), 100_000_000, 4), Time(50_000_000));
        assert_eq!(control_law(Time(5), 100_000_000, 100), Time(10_000_005));
    }

    fn pkt_at(ms: u64) -> Pkt {
        Pkt::new(
            vec![0x45; 1500],
            crate::packet::ProtoClass::Udp,
            Time::from_millis(ms),
        )
    }

    /// A standing queue whose sojourn time is above target: the first drop
    /// comes one interval after the sojourn time first exceeded it, then at
    /// interval / sqrt(n).
    #[test]
    fn first_drop_after_one_interval_then_the_control_law() {
        let cfg = QdiscConfig::Codel {
            target_us: 5_000,
            interval_us: 100_000,
            ecn: false,
        };
        let mut q = Codel::new(&cfg, Limits::default());
        let mut ev = QdiscEvents::default();
        // Packets arrive every ms from t=0; the link takes one every ms from
        // t=10 ms, so each waits 10 ms (> 5 ms target) and 10 stay queued.
        let mut drops = Vec::new();
        let mut next_arrival = 0;
        for t in 10..400u64 {
            while next_arrival <= t {
                q.enqueue(
                    pkt_at(next_arrival),
                    Time::from_millis(t),
                    InService(None),
                    &mut ev,
                );
                next_arrival += 1;
            }
            let before = ev.drops.len();
            q.dequeue(Time::from_millis(t), &mut ev);
            if ev.drops.len() > before {
                drops.push(t);
            }
        }
        // Above target since t=10: first drop at the first dequeue after 110.
        assert_eq!(drops[0], 111);
        assert_eq!(drops[1] - drops[0], 100); // interval / sqrt(1)
        assert_eq!(drops[2] - drops[1], 71); // interval / sqrt(2), to the next ms
        assert_eq!(drops[3] - drops[2], 58); // interval / sqrt(3)
    }
}
