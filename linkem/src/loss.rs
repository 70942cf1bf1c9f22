//! Random loss: Bernoulli and Gilbert-Elliott (netem `gemodel` semantics).
//!
//! Gilbert-Elliott: per packet, the packet is lost with the loss probability
//! of the current state (`loss_good` or `loss_bad`); then the state moves
//! good->bad with probability `p` or bad->good with probability `r`.
//! Stationary P(bad) = p/(p+r); with loss_bad = 1, loss_good = 0 the mean
//! loss is p/(p+r) and the mean burst length is 1/r.

use crate::config::LossConfig;
use crate::rng::Rng;

/// Loss stage state.
#[derive(Debug, Clone)]
pub struct Loss {
    model: LossConfig,
    bad: bool,
    rng: Rng,
}

impl Loss {
    pub fn new(model: &LossConfig, rng: Rng) -> Loss {
        Loss {
            model: model.clone(),
            bad: false,
            rng,
        }
    }

    /// Swap parameters; the Gilbert-Elliott state survives when the model
    /// stays Gilbert-Elliott, and resets to "good" otherwise.
    pub fn reconfigure(&mut self, model: &LossConfig) {
        let same_kind = matches!(
            (&self.model, model),
            (
                LossConfig::GilbertElliott { .. },
                LossConfig::GilbertElliott { .. }
            )
        );
        if !same_kind {
            self.bad = false;
        }
        self.model = model.clone();
    }

    /// Replace the random stream (new seed).
    pub fn reseed(&mut self, rng: Rng) {
        self.rng = rng;
    }

    /// Whether the Gilbert-Elliott chain is in the bad state.
    pub fn in_bad_state(&self) -> bool {
        self.bad
    }

    /// Decide the fate of the next packet: `true` = drop.
    pub fn lose(&mut self) -> bool {
        match self.model {
            LossConfig::None => false,
            LossConfig::Bernoulli { p } => self.rng.chance(p),
            LossConfig::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                let lost = self.rng.chance(if self.bad { loss_bad } else { loss_good });
                if self.bad {
                    if self.rng.chance(r) {
                        self.bad = false;
                    }
                } else if self.rng.chance(p) {
                    self.bad = true;
                }
                lost
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_and_extremes() {
        let mut l = Loss::new(&LossConfig::None, Rng::new(1));
        assert!((0..100).all(|_| !l.lose()));
        l.reconfigure(&LossConfig::Bernoulli { p: 1.0 });
        assert!((0..100).all(|_| l.lose()));
    }

    #[test]
    fn ge_state_kept_across_reconfigure() {
        let ge = LossConfig::GilbertElliott {
            p: 1.0,
            r: 0.0,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let mut l = Loss::new(&ge, Rng::new(1));
        assert!(!l.lose()); // good: delivered, then moves to bad
        assert!(l.in_bad_state());
        let ge2 = LossConfig::GilbertElliott {
            p: 0.5,
            r: 0.0,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        l.reconfigure(&ge2);
        assert!(l.in_bad_state());
        assert!(l.lose());
        l.reconfigure(&LossConfig::Bernoulli { p: 0.0 });
        assert!(!l.in_bad_state());
    }
}
