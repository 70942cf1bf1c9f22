//! PIE (RFC 8033) as Linux `sch_pie` runs it by default: the queue delay is
//! the sojourn time of the last dequeued packet (timestamps, no departure
//! rate estimator). Every `tupdate` the drop probability moves by
//! `alpha * (qdelay - target) + beta * (qdelay - qdelay_old)` (alpha and
//! beta per second of delay, scaled down while the probability is small,
//! steps capped at 2 %, +2 % above 250 ms, decay when the queue stays
//! empty); arriving packets are dropped early with that probability (spread
//! out by the accumulated-probability de-randomization of RFC 8033 section
//! 5.1), except during the first `max_burst` after the queue was idle, below
//! half the target at a low probability, or with less than two MTUs queued.
//! With `ecn`, an ECN-capable packet is marked instead while the probability
//! is at most 10 %.

use super::{Fifo, InService, Limits, QdiscEvents, QueueDiscipline, MTU};
use crate::config::QdiscConfig;
use crate::ecn;
use crate::pkt::Pkt;
use crate::rng::Rng;
use crate::stats::DropCause;
use crate::time::{Time, NS_PER_SEC, NS_PER_US};

#[derive(Debug, Clone, Copy, PartialEq)]
struct PieParams {
    target_ns: u64,
    tupdate_ns: u64,
    alpha: f64,
    beta: f64,
    max_burst_ns: u64,
    ecn: bool,
    bytemode: bool,
}

fn params_of(cfg: &QdiscConfig) -> Option<PieParams> {
    match *cfg {
        QdiscConfig::Pie {
            target_us,
            tupdate_us,
            alpha,
            beta,
            max_burst_us,
            ecn,
            bytemode,
        } => Some(PieParams {
            target_ns: target_us.saturating_mul(NS_PER_US),
            tupdate_ns: tupdate_us.saturating_mul(NS_PER_US).max(1),
            alpha,
            beta,
            max_burst_ns: max_burst_us.saturating_mul(NS_PER_US),
            ecn,
            bytemode,
        }),
        _ => None,
    }
}

/// PIE on one FIFO.
#[derive(Debug)]
pub struct Pie {
    fifo: Fifo,
    params: PieParams,
    rng: Rng,
    prob: f64,
    accu_prob: f64,
    burst_ns: u64,
    qdelay: u64,
    qdelay_old: u64,
    dq_tstamp: Option<Time>,
    next_update: Time,
}

impl Pie {
    pub fn new(cfg: &QdiscConfig, limits: Limits, now: Time, rng: Rng) -> Pie {
        let params = params_of(cfg).unwrap_or(PieParams {
            target_ns: 15_000_000,
            tupdate_ns: 15_000_000,
            alpha: 0.125,
            beta: 1.25,
            max_burst_ns: 150_000_000,
            ecn: false,
            bytemode: false,
        });
        Pie {
            fifo: Fifo::new(limits, false),
            params,
            rng,
            prob: 0.0,
            accu_prob: 0.0,
            burst_ns: params.max_burst_ns,
            qdelay: 0,
            qdelay_old: 0,
            dq_tstamp: None,
            next_update: now.plus_nanos(params.tupdate_ns),
        }
    }

    /// The drop probability in force.
    pub fn probability(&self) -> f64 {
        self.prob
    }

    /// Linux `pie_drop_early`.
    fn drop_early(&mut self, len: usize) -> bool {
        let p = &self.params;
        if self.burst_ns > 0 {
            return false;
        }
        if self.qdelay < p.target_ns / 2 && self.prob < 0.2 {
            return false;
        }
        if QueueDiscipline::bytes(&self.fifo) < 2 * MTU {
            return false;
        }
        let local = if p.bytemode && len as u64 <= MTU {
            self.prob * len as f64 / MTU as f64
        } else {
            self.prob
        };
        if local == 0.0 {
            self.accu_prob = 0.0;
        } else {
            self.accu_prob += local;
        }
        if self.accu_prob < 0.85 {
            return false;
        }
        if self.accu_prob >= 8.5 {
            return true;
        }
        if self.rng.next_f64() < local {
            self.accu_prob = 0.0;
            return true;
        }
        false
    }

    /// Linux `pie_calculate_probability` (timestamp mode).
    fn update(&mut self) {
        let p = self.params;
        let secs = |ns: u64| ns as f64 / NS_PER_SEC as f64;
        let (qdelay, qdelay_old) = (self.qdelay, self.qdelay_old);
        let mut update_prob = !(qdelay == 0 && QueueDiscipline::bytes(&self.fifo) != 0);
        let (mut alpha, mut beta) = (p.alpha, p.beta);
        if self.prob < 0.1 {
            alpha /= 2.0;
            beta /= 2.0;
            let mut power = 100.0;
            while self.prob < 1.0 / power && power <= 1e6 {
                alpha /= 4.0;
                beta /= 4.0;
                power *= 10.0;
            }
        }
        let mut delta =
            alpha * (secs(qdelay) - secs(p.target_ns)) + beta * (secs(qdelay) - secs(qdelay_old));
        if delta > 0.02 && self.prob >= 0.1 {
            delta = 0.02;
        }
        if qdelay > 250_000_000 {
            delta += 0.02;
        }
        self.prob += delta;
        if self.prob >= 1.0 {
            self.prob = 1.0;
            update_prob = false;
        }
        if self.prob < 0.0 {
            self.prob = 0.0;
        }
        if qdelay == 0 && qdelay_old == 0 && update_prob {
            self.prob -= self.prob / 64.0;
        }
        if qdelay < p.target_ns / 2 && qdelay_old < p.target_ns / 2 && self.prob == 0.0 {
            // Restart the measurement cycle (pie_vars_init).
            self.burst_ns = p.max_burst_ns;
            self.dq_tstamp = None;
            self.accu_prob = 0.0;
        }
        self.qdelay_old = qdelay;
    }
}

impl QueueDiscipline for Pie {
    fn enqueue(&mut self, mut pkt: Pkt, _now: Time, s: InService, ev: &mut QdiscEvents) {
        if !self.fifo.fits(pkt.len(), s) {
            ev.drop(DropCause::Queue, pkt);
            return;
        }
        if self.drop_early(pkt.len()) {
            if self.params.ecn && self.prob <= 0.1 && ecn::set_ce(&mut pkt.buf) {
                ev.ecn_marks += 1;
            } else {
                ev.drop(DropCause::Aqm, pkt);
                return;
            }
        }
        self.fifo.push(pkt);
    }

    fn dequeue(&mut self, now: Time, _ev: &mut QdiscEvents) -> Option<Pkt> {
        let pkt = self.fifo.pop()?;
        self.qdelay = if QueueDiscipline::bytes(&self.fifo) == 0 {
            0
        } else {
            now.nanos_since(pkt.arrival)
        };
        let dtime = self.dq_tstamp.map_or(0, |t| now.nanos_since(t));
        self.dq_tstamp = Some(now);
        self.burst_ns = self.burst_ns.saturating_sub(dtime);
        Some(pkt)
    }

    fn next_timer(&self) -> Option<Time> {
        Some(self.next_update)
    }

    fn on_timer(&mut self, now: Time) {
        while self.next_update <= now {
            self.update();
            self.next_update = self.next_update.plus_nanos(self.params.tupdate_ns);
        }
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
