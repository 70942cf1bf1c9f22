//! netem's per-packet decisions on arrival: duplication, corruption and
//! reordering (`duplicate P`, `corrupt P`, `reorder P gap N`).

use crate::packet::classify;
use crate::rng::Rng;

/// Flip one random bit past the IP header (of the whole packet if it has
/// nothing past its header). The router still forwards the packet; the
/// receiver's transport checksum (or QUIC's AEAD) rejects it, so it is lost
/// silently there. (netem flips a bit anywhere in the packet's linear data;
/// a flip in the IPv4 header makes the next hop drop it instead.)
pub fn corrupt(buf: &mut [u8], rng: &mut Rng) {
    if buf.is_empty() {
        return;
    }
    let from = classify(buf)
        .map(|m| m.l4_offset)
        .ok()
        .filter(|&o| o < buf.len())
        .unwrap_or(0);
    let at = from + rng.below((buf.len() - from) as u64) as usize;
    buf[at] ^= 1 << rng.below(8);
}

/// netem's reordering: once `gap - 1` packets have been delayed normally,
/// each packet is sent without the delay with probability `prob` (which
/// starts the count again).
#[derive(Debug, Clone, Default)]
pub struct Reorder {
    prob: f64,
    gap: u32,
    counter: u32,
}

impl Reorder {
    pub fn new(prob: f64, gap: u32) -> Reorder {
        Reorder {
            prob,
            gap,
            counter: 0,
        }
    }

    /// New parameters; the count so far is kept.
    pub fn set(&mut self, prob: f64, gap: u32) {
        self.prob = prob;
        self.gap = gap;
    }

    /// `true`: this packet skips the delay.
    pub fn skip_delay(&mut self, rng: &mut Rng) -> bool {
        if self.prob <= 0.0 || self.gap == 0 {
            return false;
        }
        if self.counter < self.gap - 1 || !rng.chance(self.prob) {
            self.counter = self.counter.saturating_add(1);
            false
        } else {
            self.counter = 0;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_and_probability() {
        let mut rng = Rng::new(1);
        let mut r = Reorder::new(1.0, 5);
        let picks: Vec<bool> = (0..10).map(|_| r.skip_delay(&mut rng)).collect();
        let every_fifth = [false, false, false, false, true];
        assert_eq!(picks, [every_fifth, every_fifth].concat());
        let mut never = Reorder::new(0.0, 1);
        assert!((0..100).all(|_| !never.skip_delay(&mut rng)));
    }

    #[test]
    fn corruption_flips_exactly_one_bit_past_the_header() {
        let mut rng = Rng::new(9);
        for _ in 0..200 {
            let mut p = vec![0u8; 60];
            p[0] = 0x45;
            p[2..4].copy_from_slice(&60u16.to_be_bytes());
            p[9] = 17;
            let orig = p.clone();
            corrupt(&mut p, &mut rng);
            let diff: u32 = p.iter().zip(&orig).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert_eq!(diff, 1);
            assert_eq!(p[..20], orig[..20]);
        }
        let mut junk = vec![7u8; 3];
        corrupt(&mut junk, &mut rng);
        assert_ne!(junk, vec![7u8; 3]);
    }
}
