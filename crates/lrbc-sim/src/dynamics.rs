//! Batched cart-pole dynamics for the simulated engine: observations that evolve with
//! the actions, a shaped reward, terminations (pole falls, cart leaves the track) and
//! truncations (episode length), resets on request.

/// Names of the first observation channels; the rest are `feature_<i>`.
pub const OBS_NAMES: [&str; 8] = [
    "cart_x",
    "cart_v",
    "pole_theta",
    "pole_omega",
    "sin_theta",
    "cos_theta",
    "goal_x",
    "last_force",
];

/// Names of the first action channels; the rest are `aux_<i>`.
pub const ACT_NAMES: [&str; 2] = ["force", "goal_shift"];

const GRAVITY: f32 = 9.8;
const CART_MASS: f32 = 1.0;
const POLE_MASS: f32 = 0.1;
const POLE_HALF_LENGTH: f32 = 0.5;
const FORCE_SCALE: f32 = 10.0;
const DT: f32 = 0.02;
/// The pole has fallen past this angle (radians).
pub const THETA_LIMIT: f32 = 0.21;
/// The cart has left the track past this position.
pub const X_LIMIT: f32 = 2.4;

/// `(sin x, cos x)`: a short polynomial for the small angles a balanced pole has
/// (|x| <= 1, error below 1e-7), the library call otherwise.
#[inline]
pub fn sin_cos(x: f32) -> (f32, f32) {
    if x.abs() > 1.0 {
        return x.sin_cos();
    }
    let x2 = x * x;
    // Horner forms of the Taylor series, with reciprocals (multiplies, not divides).
    let sin = x
        * (1.0
            - x2 * (1.0 / 6.0)
                * (1.0
                    - x2 * (1.0 / 20.0) * (1.0 - x2 * (1.0 / 42.0) * (1.0 - x2 * (1.0 / 72.0)))));
    let cos = 1.0
        - x2 * 0.5
            * (1.0
                - x2 * (1.0 / 12.0)
                    * (1.0
                        - x2 * (1.0 / 30.0)
                            * (1.0 - x2 * (1.0 / 56.0) * (1.0 - x2 * (1.0 / 90.0)))));
    (sin, cos)
}

/// All envs' state, structure of arrays.
#[derive(Clone, Debug)]
pub struct CartPoles {
    pub num_envs: usize,
    pub obs_size: usize,
    pub act_size: usize,
    pub x: Vec<f32>,
    pub v: Vec<f32>,
    pub theta: Vec<f32>,
    pub omega: Vec<f32>,
    pub goal: Vec<f32>,
    pub force: Vec<f32>,
    pub steps: Vec<u32>,
    pub episode: Vec<u32>,
    /// Episode length before truncation, per env (varied so envs do not truncate together).
    pub max_steps: Vec<u32>,
    pub done: Vec<u8>,
    pub truncated: Vec<u8>,
    pub reward: Vec<f32>,
    rng: u64,
    /// Mixing weights of the extra observation channels (of x, theta and v), one
    /// vector each so that the per-env loop vectorises.
    feature_weights: [Vec<f32>; 3],
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform value in [-1, 1).
fn uniform(state: &mut u64) -> f32 {
    (splitmix(state) >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

impl CartPoles {
    pub fn new(num_envs: usize, obs_size: usize, act_size: usize, seed: u64) -> Self {
        let mut rng = seed;
        let extra = obs_size.saturating_sub(OBS_NAMES.len());
        let mut weights = || (0..extra).map(|_| uniform(&mut rng)).collect::<Vec<f32>>();
        let feature_weights = [weights(), weights(), weights()];
        let mut s = Self {
            num_envs,
            obs_size,
            act_size,
            x: vec![0.0; num_envs],
            v: vec![0.0; num_envs],
            theta: vec![0.0; num_envs],
            omega: vec![0.0; num_envs],
            goal: vec![0.0; num_envs],
            force: vec![0.0; num_envs],
            steps: vec![0; num_envs],
            episode: vec![0; num_envs],
            max_steps: (0..num_envs).map(|i| 400 + (i as u32 * 37) % 200).collect(),
            done: vec![0; num_envs],
            truncated: vec![0; num_envs],
            reward: vec![0.0; num_envs],
            rng,
            feature_weights,
        };
        for i in 0..num_envs {
            s.reset(i);
            s.episode[i] = 0;
        }
        s
    }

    /// Starts a new episode for env `i`.
    pub fn reset(&mut self, i: usize) {
        let r = &mut self.rng;
        self.x[i] = 0.5 * uniform(r);
        self.v[i] = 0.05 * uniform(r);
        self.theta[i] = 0.05 * uniform(r);
        self.omega[i] = 0.05 * uniform(r);
        self.goal[i] = 1.5 * uniform(r);
        self.force[i] = 0.0;
        self.steps[i] = 0;
        self.episode[i] += 1;
        self.done[i] = 0;
        self.truncated[i] = 0;
        self.reward[i] = 0.0;
    }

    /// Applies reset flags (and clears them), then steps every env with `actions`
    /// (`num_envs * act_size`, row-major). Envs that are done and not reset stay put.
    pub fn step(&mut self, actions: &[f32], resets: &mut [u8]) {
        // Resets first (rare, branchy), then the physics of all envs in one
        // branch-free pass that the compiler can vectorise.
        for i in 0..self.num_envs.min(resets.len()) {
            if resets[i] != 0 {
                self.reset(i);
                resets[i] = 0;
            }
        }
        let n = self.num_envs;
        let act = self.act_size.max(1);
        let (x, v, theta, omega) = (
            &mut self.x[..n],
            &mut self.v[..n],
            &mut self.theta[..n],
            &mut self.omega[..n],
        );
        let (goal, force_out, steps) = (
            &mut self.goal[..n],
            &mut self.force[..n],
            &mut self.steps[..n],
        );
        let (done, truncated, reward) = (
            &mut self.done[..n],
            &mut self.truncated[..n],
            &mut self.reward[..n],
        );
        let max_steps = &self.max_steps[..n];
        const INV_TOTAL_MASS: f32 = 1.0 / (CART_MASS + POLE_MASS);
        for i in 0..n {
            let running = done[i] == 0 && truncated[i] == 0;
            let a = actions.get(i * act).copied().unwrap_or(0.0);
            let a = if a.is_finite() {
                a.clamp(-1.0, 1.0)
            } else {
                0.0
            };
            let shift = if self.act_size > 1 {
                actions.get(i * act + 1).copied().unwrap_or(0.0)
            } else {
                0.0
            };
            let shift = if shift.is_finite() {
                shift.clamp(-1.0, 1.0)
            } else {
                0.0
            };
            let force = a * FORCE_SCALE;
            let (sin, cos) = sin_cos(theta[i]);
            let temp =
                (force + POLE_MASS * POLE_HALF_LENGTH * omega[i] * omega[i] * sin) * INV_TOTAL_MASS;
            let theta_acc = (GRAVITY * sin - cos * temp)
                / (POLE_HALF_LENGTH * (4.0 / 3.0 - POLE_MASS * cos * cos * INV_TOTAL_MASS));
            let x_acc = temp - POLE_MASS * POLE_HALF_LENGTH * theta_acc * cos * INV_TOTAL_MASS;
            let nx = x[i] + DT * v[i];
            let nv = v[i] + DT * x_acc;
            let ntheta = theta[i] + DT * omega[i];
            let nomega = omega[i] + DT * theta_acc;
            let ngoal = (goal[i] + 0.01 * shift).clamp(-2.0, 2.0);
            let nsteps = steps[i] + 1;
            let fell = ntheta.abs() > THETA_LIMIT || nx.abs() > X_LIMIT;
            let t = ntheta * (1.0 / THETA_LIMIT);
            let shaped = 1.0 - 0.5 * t * t - 0.2 * (nx - ngoal).abs().min(2.0);
            // Ended envs stay put until the client resets them.
            x[i] = if running { nx } else { x[i] };
            v[i] = if running { nv } else { v[i] };
            theta[i] = if running { ntheta } else { theta[i] };
            omega[i] = if running { nomega } else { omega[i] };
            goal[i] = if running { ngoal } else { goal[i] };
            force_out[i] = if running { force } else { force_out[i] };
            steps[i] = if running { nsteps } else { steps[i] };
            reward[i] = if !running {
                0.0
            } else if fell {
                -1.0
            } else {
                shaped
            };
            done[i] = if running { u8::from(fell) } else { done[i] };
            truncated[i] = if running {
                u8::from(!fell && nsteps >= max_steps[i])
            } else {
                truncated[i]
            };
        }
    }

    /// Writes every env's observations into `obs` (`num_envs * obs_size`).
    pub fn observe(&self, obs: &mut [f32]) {
        self.observe_envs(0, obs);
    }

    /// Writes the observations of envs `first..` into `obs`, as many whole rows as fit.
    pub fn observe_envs(&self, first: usize, obs: &mut [f32]) {
        let n = self.obs_size;
        for (i, row) in obs
            .chunks_exact_mut(n)
            .enumerate()
            .map(|(k, row)| (first + k, row))
            .take_while(|(i, _)| *i < self.num_envs)
        {
            let (sin, cos) = sin_cos(self.theta[i]);
            let base = [
                self.x[i],
                self.v[i],
                self.theta[i],
                self.omega[i],
                sin,
                cos,
                self.goal[i],
                self.force[i],
            ];
            let head = n.min(base.len());
            let (front, features) = row.split_at_mut(head);
            for (f, b) in front.iter_mut().zip(base) {
                *f = b;
            }
            let (x, theta, v) = (self.x[i], self.theta[i], self.v[i]);
            let [wx, wt, wv] = &self.feature_weights;
            for (((f, a), b), c) in features.iter_mut().zip(wx).zip(wt).zip(wv) {
                *f = a * x + b * theta + c * v;
            }
        }
    }

    /// Observation channel names for the names region.
    pub fn obs_names(obs_size: usize) -> Vec<String> {
        (0..obs_size)
            .map(|i| {
                OBS_NAMES
                    .get(i)
                    .map_or_else(|| format!("feature_{i}"), |s| (*s).to_string())
            })
            .collect()
    }

    pub fn act_names(act_size: usize) -> Vec<String> {
        (0..act_size)
            .map(|i| {
                ACT_NAMES
                    .get(i)
                    .map_or_else(|| format!("aux_{i}"), |s| (*s).to_string())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_polynomial_sine_matches_the_library() {
        for k in -2000..=2000 {
            let x = k as f32 / 1000.0;
            let (s, c) = sin_cos(x);
            assert!((s - x.sin()).abs() < 1e-6, "sin {x}");
            assert!((c - x.cos()).abs() < 1e-6, "cos {x}");
        }
    }

    #[test]
    fn observations_evolve_with_the_actions() {
        let mut a = CartPoles::new(2, 10, 2, 7);
        let mut b = a.clone();
        let mut resets = vec![0u8; 2];
        for _ in 0..10 {
            a.step(&[1.0, 0.0, 1.0, 0.0], &mut resets);
            b.step(&[-1.0, 0.0, -1.0, 0.0], &mut resets);
        }
        let (mut oa, mut ob) = (vec![0.0; 20], vec![0.0; 20]);
        a.observe(&mut oa);
        b.observe(&mut ob);
        assert!(oa[0] > ob[0], "pushing right moves the cart right");
        assert_eq!(oa[7], 10.0, "last_force");
        assert_ne!(oa[8], 0.0, "feature channels are filled");
    }

    #[test]
    fn a_falling_pole_terminates_and_a_reset_flag_restarts_and_is_cleared() {
        let mut s = CartPoles::new(1, 8, 1, 3);
        let mut resets = vec![0u8];
        let mut steps = 0;
        while s.done[0] == 0 && steps < 1000 {
            s.step(&[1.0], &mut resets);
            steps += 1;
        }
        assert_eq!(s.done[0], 1, "full force topples the pole");
        assert_eq!(s.reward[0], -1.0);
        let episode = s.episode[0];
        resets[0] = 1;
        s.step(&[0.0], &mut resets);
        assert_eq!(resets[0], 0, "the flag is cleared");
        assert_eq!(s.episode[0], episode + 1);
        assert_eq!(s.done[0], 0);
    }

    #[test]
    fn long_episodes_truncate() {
        let mut s = CartPoles::new(1, 8, 1, 3);
        s.max_steps[0] = 5;
        s.theta[0] = 0.0;
        s.omega[0] = 0.0;
        let mut resets = vec![0u8];
        for _ in 0..5 {
            s.step(&[0.0], &mut resets);
        }
        assert_eq!((s.done[0], s.truncated[0]), (0, 1));
    }
}
