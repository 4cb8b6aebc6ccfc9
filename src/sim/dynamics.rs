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
    /// Mixing weights of the extra observation channels.
    feature_weights: Vec<[f32; 3]>,
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
        let feature_weights = (0..obs_size.saturating_sub(OBS_NAMES.len()))
            .map(|_| [uniform(&mut rng), uniform(&mut rng), uniform(&mut rng)])
            .collect();
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
        for i in 0..self.num_envs {
            if resets.get(i).is_some_and(|&r| r != 0) {
                self.reset(i);
                resets[i] = 0;
            }
            if self.done[i] != 0 || self.truncated[i] != 0 {
                self.reward[i] = 0.0;
                continue;
            }
            let a = actions.get(i * self.act_size).copied().unwrap_or(0.0);
            let a = if a.is_finite() {
                a.clamp(-1.0, 1.0)
            } else {
                0.0
            };
            if self.act_size > 1 {
                let shift = actions.get(i * self.act_size + 1).copied().unwrap_or(0.0);
                if shift.is_finite() {
                    self.goal[i] = (self.goal[i] + 0.01 * shift.clamp(-1.0, 1.0)).clamp(-2.0, 2.0);
                }
            }
            let force = a * FORCE_SCALE;
            let (sin, cos) = self.theta[i].sin_cos();
            let total_mass = CART_MASS + POLE_MASS;
            let temp = (force + POLE_MASS * POLE_HALF_LENGTH * self.omega[i] * self.omega[i] * sin)
                / total_mass;
            let theta_acc = (GRAVITY * sin - cos * temp)
                / (POLE_HALF_LENGTH * (4.0 / 3.0 - POLE_MASS * cos * cos / total_mass));
            let x_acc = temp - POLE_MASS * POLE_HALF_LENGTH * theta_acc * cos / total_mass;
            self.x[i] += DT * self.v[i];
            self.v[i] += DT * x_acc;
            self.theta[i] += DT * self.omega[i];
            self.omega[i] += DT * theta_acc;
            self.force[i] = force;
            self.steps[i] += 1;
            let fell = self.theta[i].abs() > THETA_LIMIT || self.x[i].abs() > X_LIMIT;
            let distance = (self.x[i] - self.goal[i]).abs();
            self.reward[i] = if fell {
                -1.0
            } else {
                1.0 - 0.5 * (self.theta[i] / THETA_LIMIT).powi(2) - 0.2 * distance.min(2.0)
            };
            self.done[i] = u8::from(fell);
            self.truncated[i] = u8::from(!fell && self.steps[i] >= self.max_steps[i]);
        }
    }

    /// Writes every env's observations into `obs` (`num_envs * obs_size`).
    pub fn observe(&self, obs: &mut [f32]) {
        let n = self.obs_size;
        for (i, row) in obs.chunks_exact_mut(n).enumerate().take(self.num_envs) {
            let (sin, cos) = self.theta[i].sin_cos();
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
            row[..head].copy_from_slice(&base[..head]);
            for (j, w) in self.feature_weights.iter().enumerate() {
                row[head + j] = w[0] * self.x[i] + w[1] * self.theta[i] + w[2] * self.v[i];
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
