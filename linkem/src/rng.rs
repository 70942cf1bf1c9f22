//! Small deterministic PRNG: xoshiro256** seeded through splitmix64.
//!
//! Each stage owns its own [`Rng`], derived from the configured seed and a
//! stage-specific salt, so the random stream of one stage does not depend on
//! how often another stage draws.

/// One step of splitmix64 (also used to expand seeds).
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Jitter values X are cut at this many jitters from the mean (netem's
/// distribution tables cannot go further).
pub const MAX_JITTER_X: f64 = 4.0;

/// xoshiro256** generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// Seed the generator; any seed (including 0) gives a valid state.
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { s }
    }

    /// A generator for one stage: independent streams per (seed, salt).
    pub fn for_stage(seed: u64, salt: u64) -> Rng {
        let mut sm = seed ^ salt.wrapping_mul(0xD1B5_4A32_D192_ED03);
        Rng::new(splitmix64(&mut sm))
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `true` with probability `p` (p <= 0 never, p >= 1 always).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            false
        } else if p >= 1.0 {
            true
        } else {
            self.next_f64() < p
        }
    }

    /// Uniform in [-1, 1).
    pub fn uniform_sym(&mut self) -> f64 {
        self.next_f64() * 2.0 - 1.0
    }

    /// Standard normal sample (Box-Muller, one value per call).
    pub fn normal(&mut self) -> f64 {
        // 1 - u is in (0, 1], so ln never sees 0.
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Pareto sample with scale 1 and shape `alpha` (values >= 1).
    pub fn pareto(&mut self, alpha: f64) -> f64 {
        let u = 1.0 - self.next_f64(); // (0, 1]
        u.powf(-1.0 / alpha)
    }

    /// netem's "pareto" table value: Pareto(a=3) centred on its mean 1.5 and
    /// scaled by 4/3 (iproute2 `pareto.c`); mean 0, heavy right tail, min -2/3.
    pub fn netem_pareto(&mut self) -> f64 {
        (self.pareto(3.0) - 1.5) * (4.0 / 3.0)
    }

    /// netem's "paretonormal": 1/4 normal + 3/4 pareto (iproute2 `paretonormal.c`).
    pub fn netem_paretonormal(&mut self) -> f64 {
        0.25 * self.normal() + 0.75 * self.netem_pareto()
    }

    /// A jitter value X of distribution `dist` (uniform in [-1, 1); the
    /// others cut at +-4, as netem's tables are: s16 entries scaled by 8192).
    pub fn jitter(&mut self, dist: crate::config::JitterDist) -> f64 {
        use crate::config::JitterDist;
        let x = match dist {
            JitterDist::Uniform => return self.uniform_sym(),
            JitterDist::Normal => self.normal(),
            JitterDist::Pareto => self.netem_pareto(),
            JitterDist::Paretonormal => self.netem_paretonormal(),
        };
        x.clamp(-MAX_JITTER_X, MAX_JITTER_X)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_seed_sensitive() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }

    #[test]
    fn known_splitmix_value() {
        // Reference value of splitmix64 for state 0.
        let mut s = 0;
        assert_eq!(splitmix64(&mut s), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn moments() {
        let mut r = Rng::new(42);
        let n = 200_000;
        let (mut sum, mut sq) = (0.0, 0.0);
        for _ in 0..n {
            let x = r.normal();
            sum += x;
            sq += x * x;
        }
        let mean = sum / n as f64;
        let var = sq / n as f64 - mean * mean;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "var {var}");
        let mut umean = 0.0;
        for _ in 0..n {
            let u = r.next_f64();
            assert!((0.0..1.0).contains(&u));
            umean += u;
        }
        assert!((umean / n as f64 - 0.5).abs() < 0.005);
        let pm: f64 = (0..n).map(|_| r.netem_pareto()).sum::<f64>() / n as f64;
        assert!(pm.abs() < 0.05, "pareto mean {pm}");
    }
}
