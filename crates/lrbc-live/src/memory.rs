//! The window's memory budget: one figure (a setting) shared among what the window
//! keeps while attached (the flight recorder's last seconds too), each part counted in real bytes (what its allocations hold,
//! not how many items), so that once every part is full the window's memory stays flat.

/// The budget when nothing else is set.
pub const DEFAULT_BUDGET_MIB: u32 = 128;
/// The smallest budget the setting allows.
pub const MIN_BUDGET_MIB: u32 = 16;
/// The largest budget the setting allows.
pub const MAX_BUDGET_MIB: u32 = 64 * 1024;

/// What a heap allocation costs beyond its bytes (glibc's chunk header, rounded).
pub const ALLOC_OVERHEAD: usize = 16;

/// Bytes an allocation of `bytes` holds (none for an empty one).
pub fn heap(bytes: usize) -> usize {
    if bytes == 0 {
        0
    } else {
        bytes + ALLOC_OVERHEAD
    }
}

/// Bytes a vector's allocation holds.
pub fn vec_bytes<T>(v: &Vec<T>) -> usize {
    heap(v.capacity() * size_of::<T>())
}

/// The budget and its shares: histories seven twentieths, the traffic list a fifth, the
/// flight recorder a quarter, camera images a tenth, episodes a fortieth, streamed frames
/// the rest (three fortieths).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryBudget {
    pub total_bytes: usize,
}

impl Default for MemoryBudget {
    fn default() -> Self {
        Self::from_mib(DEFAULT_BUDGET_MIB)
    }
}

impl MemoryBudget {
    /// A budget of `mib` MiB, within the setting's bounds.
    pub fn from_mib(mib: u32) -> Self {
        let mib = mib.clamp(MIN_BUDGET_MIB, MAX_BUDGET_MIB);
        Self {
            total_bytes: (mib as usize) << 20,
        }
    }

    /// Overview, reward history and the watched envs' points and rows.
    pub fn histories(self) -> usize {
        self.total_bytes / 20 * 7
    }

    /// Every env's episode totals, the recent episodes in full and the run's time bins.
    pub fn episodes(self) -> usize {
        self.total_bytes / 40
    }

    /// The traffic list: decoded records, losses, malformed entries.
    pub fn traffic(self) -> usize {
        self.total_bytes / 5
    }

    /// The flight recorder's rolling buffer of the last seconds.
    pub fn flight(self) -> usize {
        self.total_bytes / 4
    }

    /// The image region's copy and its textures.
    pub fn camera_images(self) -> usize {
        self.total_bytes / 10
    }

    /// The newest frame of each camera or viewport stream seen in traffic, and its
    /// texture.
    pub fn streamed_frames(self) -> usize {
        self.total_bytes
            - self.histories()
            - self.traffic()
            - self.flight()
            - self.camera_images()
            - self.episodes()
    }
}

/// Bytes in use by each part, against its share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUse {
    pub histories: usize,
    pub episodes: usize,
    pub traffic: usize,
    pub camera_images: usize,
    pub streamed_frames: usize,
}

impl MemoryUse {
    pub fn total(self) -> usize {
        self.histories + self.episodes + self.traffic + self.camera_images + self.streamed_frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_add_up_to_the_budget() {
        for mib in [
            MIN_BUDGET_MIB,
            100,
            DEFAULT_BUDGET_MIB,
            1000,
            MAX_BUDGET_MIB,
        ] {
            let b = MemoryBudget::from_mib(mib);
            assert_eq!(
                b.histories()
                    + b.traffic()
                    + b.flight()
                    + b.camera_images()
                    + b.episodes()
                    + b.streamed_frames(),
                b.total_bytes
            );
            assert!(b.streamed_frames() >= b.total_bytes / 20);
        }
        assert_eq!(
            MemoryBudget::from_mib(0),
            MemoryBudget::from_mib(MIN_BUDGET_MIB)
        );
        assert_eq!(MemoryBudget::default().total_bytes, 128 << 20);
    }

    #[test]
    fn allocations_count_their_capacity() {
        let mut v: Vec<u64> = Vec::with_capacity(10);
        v.push(1);
        assert_eq!(vec_bytes(&v), 80 + ALLOC_OVERHEAD);
        assert_eq!(vec_bytes(&Vec::<u8>::new()), 0);
    }
}
