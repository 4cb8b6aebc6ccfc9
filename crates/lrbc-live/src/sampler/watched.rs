//! The watched envs: the envs whose observations, actions and rewards are kept in full.
//! One type keeps the rule for every place that changes them (the Envs panel, the Events
//! and Episodes clicks, the remote viewer, `watch`): at most [`MAX_WATCHED_ENVS`], no
//! env twice, in the order they were watched, and a new one beyond the cap replaces the
//! one watched longest.

/// The most envs watched at once: each is a line in every plot and a row per frame.
pub const MAX_WATCHED_ENVS: usize = 16;

/// The envs watched, oldest first. Kept in the settings file as a list of env indices.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "Vec<u32>", into = "Vec<u32>")]
pub struct WatchedEnvs(Vec<u32>);

/// What [`WatchedEnvs::watch`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watched {
    /// The env was watched already.
    Already,
    /// The env is watched from now on.
    Added,
    /// The env is watched from now on, in place of this one (the oldest: the cap was
    /// reached).
    Replacing(u32),
}

impl WatchedEnvs {
    /// These envs, in this order: a repeated env counts once (where it first comes), and
    /// beyond the cap the newest [`MAX_WATCHED_ENVS`] are kept, as if watched one by one.
    pub fn new(envs: impl IntoIterator<Item = u32>) -> Self {
        let mut w = Self(Vec::new());
        for e in envs {
            w.watch(e);
        }
        w
    }

    /// Watches `env`; at the cap, the env watched longest makes room for it.
    pub fn watch(&mut self, env: u32) -> Watched {
        if self.0.contains(&env) {
            return Watched::Already;
        }
        let replaced = (self.0.len() >= MAX_WATCHED_ENVS).then(|| self.0.remove(0));
        self.0.push(env);
        replaced.map_or(Watched::Added, Watched::Replacing)
    }

    /// Stops watching `env`; false: it was not watched.
    pub fn unwatch(&mut self, env: u32) -> bool {
        let before = self.0.len();
        self.0.retain(|&e| e != env);
        self.0.len() != before
    }

    /// Moves every watched env by `delta`, wrapping within `num_envs`, in the same order.
    pub fn shift(&mut self, delta: i64, num_envs: u32) {
        let n = i64::from(num_envs.max(1));
        let moved = self.0.iter().map(|&e| {
            // In 0..n, and n fits in a u32.
            (i64::from(e) + delta).rem_euclid(n) as u32
        });
        *self = Self::new(moved.collect::<Vec<_>>());
    }

    pub fn contains(&self, env: u32) -> bool {
        self.0.contains(&env)
    }

    /// The watched envs, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// The watched envs a segment of `num_envs` envs has, oldest first (collected where
    /// they are kept, counted where only their number matters).
    pub fn within(&self, num_envs: u32) -> impl Iterator<Item = u32> + '_ {
        self.iter().filter(move |&e| e < num_envs)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Vec<u32>> for WatchedEnvs {
    fn from(envs: Vec<u32>) -> Self {
        Self::new(envs)
    }
}

impl From<WatchedEnvs> for Vec<u32> {
    fn from(w: WatchedEnvs) -> Self {
        w.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_env_beyond_the_cap_replaces_the_one_watched_longest() {
        let mut w = WatchedEnvs::new(0..MAX_WATCHED_ENVS as u32);
        assert_eq!(w.len(), MAX_WATCHED_ENVS);
        assert_eq!(w.watch(5), Watched::Already);
        assert_eq!(w.watch(100), Watched::Replacing(0));
        assert_eq!(w.watch(101), Watched::Replacing(1));
        assert_eq!(w.len(), MAX_WATCHED_ENVS);
        assert_eq!(w.iter().next(), Some(2));
        assert_eq!(w.iter().last(), Some(101));
    }

    #[test]
    fn a_list_keeps_its_order_counts_each_env_once_and_keeps_the_newest_at_the_cap() {
        assert_eq!(Vec::from(WatchedEnvs::new([3, 1, 3, 2, 1])), vec![3, 1, 2]);
        let long = WatchedEnvs::new(0..20);
        assert_eq!(Vec::from(long), (4..20).collect::<Vec<_>>());
    }

    #[test]
    fn the_settings_files_list_reads_under_the_same_rule() {
        let w: WatchedEnvs = serde_json::from_str("[7, 7, 2]").unwrap();
        assert_eq!(Vec::from(w.clone()), vec![7, 2]);
        assert_eq!(serde_json::to_string(&w).unwrap(), "[7,2]");
    }

    #[test]
    fn a_shift_wraps_within_the_envs_and_keeps_the_order() {
        let mut w = WatchedEnvs::new([0, 1, 7]);
        w.shift(1, 8);
        assert_eq!(Vec::from(w.clone()), vec![1, 2, 0]);
        w.shift(-2, 8);
        assert_eq!(Vec::from(w), vec![7, 0, 6]);
        // Envs beyond a smaller segment fold onto others: each is watched once.
        let mut w = WatchedEnvs::new([1, 5]);
        w.shift(0, 4);
        assert_eq!(Vec::from(w), vec![1]);
    }

    #[test]
    fn unwatching_says_whether_the_env_was_watched() {
        let mut w = WatchedEnvs::new([4, 9]);
        assert!(w.unwatch(4));
        assert!(!w.unwatch(4));
        assert_eq!(w.within(10).collect::<Vec<_>>(), vec![9]);
        assert_eq!(w.within(9).count(), 0);
    }
}
