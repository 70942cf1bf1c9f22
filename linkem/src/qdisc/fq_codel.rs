//! fq_codel (RFC 8290), as Linux `sch_fq_codel` does it: packets are hashed
//! by flow into `flows` queues; new flows are served before old ones, flows
//! take turns by deficit round robin with a `quantum` of bytes, and each
//! flow's queue runs CoDel (whose "more than one MTU queued" rule looks at
//! the whole discipline's backlog, as in Linux). When the limits are
//! exceeded, the flow with the largest backlog loses packets from its head
//! (up to half its backlog, at most 64 packets).

use super::codel::{self, CodelParams, CodelSource, CodelVars};
use super::{InService, Limits, QdiscEvents, QueueDiscipline};
use crate::config::QdiscConfig;
use crate::packet::flow_hash;
use crate::pkt::Pkt;
use crate::stats::DropCause;
use crate::time::Time;
use std::collections::VecDeque;

/// Linux's `drop_batch_size`.
const DROP_BATCH: usize = 64;

#[derive(Debug, Default)]
struct Flow {
    q: VecDeque<Pkt>,
    bytes: u64,
    deficit: i64,
    vars: CodelVars,
    /// In the new or the old list.
    listed: bool,
}

/// One flow's queue as CoDel sees it.
struct FlowSource<'a> {
    q: &'a mut VecDeque<Pkt>,
    flow_bytes: &'a mut u64,
    total_len: &'a mut usize,
    total_bytes: &'a mut u64,
}

impl CodelSource for FlowSource<'_> {
    fn pop(&mut self) -> Option<Pkt> {
        let p = self.q.pop_front()?;
        let n = p.len() as u64;
        *self.flow_bytes -= n;
        *self.total_bytes -= n;
        *self.total_len -= 1;
        Some(p)
    }
    fn backlog(&self) -> u64 {
        *self.total_bytes
    }
}

/// fq_codel.
#[derive(Debug)]
pub struct FqCodel {
    params: CodelParams,
    quantum: i64,
    perturbation: u64,
    flows: Vec<Flow>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    limits: Limits,
    len: usize,
    bytes: u64,
}

fn params_of(cfg: &QdiscConfig) -> Option<(CodelParams, u32, u32)> {
    match *cfg {
        QdiscConfig::FqCodel {
            target_us,
            interval_us,
            ecn,
            flows,
            quantum,
        } => Some((
            CodelParams::new(target_us, interval_us, ecn),
            flows,
            quantum,
        )),
        _ => None,
    }
}

impl FqCodel {
    pub fn new(cfg: &QdiscConfig, limits: Limits, perturbation: u64) -> FqCodel {
        let (params, flows, quantum) =
            params_of(cfg).unwrap_or((CodelParams::new(5_000, 100_000, true), 1024, 1500));
        FqCodel {
            params,
            quantum: i64::from(quantum),
            perturbation,
            flows: (0..flows.max(1)).map(|_| Flow::default()).collect(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            limits,
            len: 0,
            bytes: 0,
        }
    }

    fn bucket(&self, pkt: &Pkt) -> usize {
        (flow_hash(&pkt.buf, self.perturbation) % self.flows.len() as u64) as usize
    }

    /// Drop from the head of the flow with the largest backlog.
    fn drop_from_fattest(&mut self, ev: &mut QdiscEvents) {
        let Some(idx) =
            (0..self.flows.len()).max_by_key(|&i| (self.flows[i].bytes, usize::MAX - i))
        else {
            return;
        };
        let threshold = self.flows[idx].bytes / 2;
        let mut dropped = 0u64;
        for _ in 0..DROP_BATCH {
            let f = &mut self.flows[idx];
            let Some(p) = f.q.pop_front() else { break };
            let n = p.len() as u64;
            f.bytes -= n;
            self.bytes -= n;
            self.len -= 1;
            dropped += n;
            ev.drop(DropCause::Queue, p);
            if dropped >= threshold {
                break;
            }
        }
    }

    fn push(&mut self, idx: usize, pkt: Pkt) {
        let f = &mut self.flows[idx];
        f.bytes += pkt.len() as u64;
        self.bytes += pkt.len() as u64;
        self.len += 1;
        f.q.push_back(pkt);
        if !f.listed {
            f.listed = true;
            f.deficit = self.quantum;
            self.new_flows.push_back(idx);
        }
    }
}

impl QueueDiscipline for FqCodel {
    fn enqueue(&mut self, pkt: Pkt, _now: Time, s: InService, ev: &mut QdiscEvents) {
        let idx = self.bucket(&pkt);
        self.push(idx, pkt);
        if self
            .limits
            .exceeded(self.len + s.count(), self.bytes + s.bytes())
        {
            self.drop_from_fattest(ev);
        }
    }

    fn dequeue(&mut self, now: Time, ev: &mut QdiscEvents) -> Option<Pkt> {
        loop {
            let (from_new, idx) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (true, i),
                (None, Some(&i)) => (false, i),
                (None, None) => return None,
            };
            let list = |s: &mut FqCodel| {
                if from_new {
                    s.new_flows.pop_front();
                } else {
                    s.old_flows.pop_front();
                }
            };
            if self.flows[idx].deficit <= 0 {
                self.flows[idx].deficit += self.quantum;
                list(self);
                self.old_flows.push_back(idx);
                continue;
            }
            let f = &mut self.flows[idx];
            let mut src = FlowSource {
                q: &mut f.q,
                flow_bytes: &mut f.bytes,
                total_len: &mut self.len,
                total_bytes: &mut self.bytes,
            };
            let got = codel::dequeue(&mut src, &self.params, &mut f.vars, now, ev);
            match got {
                Some(p) => {
                    self.flows[idx].deficit -= p.len() as i64;
                    return Some(p);
                }
                None => {
                    list(self);
                    if from_new && !self.old_flows.is_empty() {
                        // Force a pass through the old flows (no starvation).
                        self.old_flows.push_back(idx);
                    } else {
                        self.flows[idx].listed = false;
                    }
                }
            }
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    fn reconfigure(&mut self, cfg: &QdiscConfig) -> bool {
        match params_of(cfg) {
            Some((p, flows, quantum)) if flows as usize == self.flows.len() => {
                self.params = p;
                self.quantum = i64::from(quantum);
                true
            }
            _ => false,
        }
    }

    fn drain(&mut self) -> Vec<Pkt> {
        let mut ev = QdiscEvents::default();
        let no_aqm = CodelParams {
            target_ns: u64::MAX,
            ..self.params
        };
        let saved = std::mem::replace(&mut self.params, no_aqm);
        let out = std::iter::from_fn(|| self.dequeue(Time::ZERO, &mut ev)).collect();
        self.params = saved;
        out
    }

    fn restore(&mut self, pkt: Pkt) {
        let idx = self.bucket(&pkt);
        self.push(idx, pkt);
    }
}
