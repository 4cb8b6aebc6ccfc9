//! Processes behind a segment: names, liveness, CPU and memory (sysinfo).

use sysinfo::{Pid, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, RefreshKind, System};

/// What is known of one process.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ProcInfo {
    pub pid: u32,
    /// `None` when the process does not exist (or could not be read).
    pub name: Option<String>,
    /// Exists and is not a zombie.
    pub alive: bool,
    pub cpu_percent: f32,
    pub memory_bytes: u64,
}

impl ProcInfo {
    /// "name (pid, alive)" for text output; "-" for pid 0.
    pub fn describe(&self) -> String {
        if self.pid == 0 {
            return "-".into();
        }
        format!(
            "{} ({}, {})",
            self.pid,
            self.name.as_deref().unwrap_or("?"),
            if self.alive { "alive" } else { "dead" }
        )
    }
}

/// A process table that refreshes only what it is asked about.
pub struct Processes {
    sys: Option<System>,
}

impl std::fmt::Debug for Processes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processes").finish_non_exhaustive()
    }
}

impl Default for Processes {
    fn default() -> Self {
        Self::new()
    }
}

fn kind() -> ProcessRefreshKind {
    ProcessRefreshKind::nothing()
        .with_cpu()
        .with_memory()
        .without_tasks()
}

impl Processes {
    pub fn new() -> Self {
        let sys = System::new_with_specifics(RefreshKind::nothing().with_processes(kind())).ok();
        Self { sys }
    }

    /// Re-reads the given processes (dead ones are forgotten).
    pub fn refresh(&mut self, pids: &[u32]) {
        // Duplicates confuse sysinfo's dead-process removal: pass each pid once.
        let mut unique: Vec<u32> = pids.iter().copied().filter(|&p| p != 0).collect();
        unique.sort_unstable();
        unique.dedup();
        let pids: Vec<Pid> = unique.into_iter().map(Pid::from_u32).collect();
        if let Some(sys) = &mut self.sys
            && !pids.is_empty()
        {
            sys.refresh_processes_specifics(ProcessesToUpdate::Some(&pids), true, kind());
        }
    }

    /// Re-reads every process (for the attach view's process list).
    pub fn refresh_all(&mut self) {
        if let Some(sys) = &mut self.sys {
            sys.refresh_processes_specifics(ProcessesToUpdate::All, true, kind());
        }
    }

    /// What is known of `pid` as of the last refresh.
    pub fn info(&self, pid: u32) -> ProcInfo {
        let process = self
            .sys
            .as_ref()
            .filter(|_| pid != 0)
            .and_then(|s| s.process(Pid::from_u32(pid)));
        match process {
            Some(p) => ProcInfo {
                pid,
                name: Some(p.name().to_string_lossy().into_owned()),
                alive: !matches!(p.status(), ProcessStatus::Zombie | ProcessStatus::Dead),
                cpu_percent: p.cpu_usage(),
                memory_bytes: p.memory(),
            },
            None => ProcInfo {
                pid,
                name: None,
                alive: false,
                cpu_percent: 0.0,
                memory_bytes: 0,
            },
        }
    }

    /// Every process known as of the last refresh.
    pub fn pids(&self) -> Vec<u32> {
        self.sys
            .as_ref()
            .map(|s| s.processes().keys().map(|p| p.as_u32()).collect())
            .unwrap_or_default()
    }

    /// Refreshes `pid` and tells whether it is alive.
    pub fn is_alive(&mut self, pid: u32) -> bool {
        self.refresh(&[pid]);
        self.info(pid).alive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_named() {
        let mut p = Processes::new();
        let me = std::process::id();
        assert!(p.is_alive(me));
        assert!(p.info(me).name.is_some());
    }

    #[test]
    fn a_reaped_child_is_dead() {
        let pid = crate::testutil::dead_pid();
        let mut p = Processes::new();
        assert!(!p.is_alive(pid));
        assert_eq!(p.info(0).describe(), "-");
    }
}

#[cfg(test)]
mod refresh_tests {
    use super::*;

    #[test]
    fn refreshing_with_repeated_pids_keeps_a_live_process_alive() {
        let mut p = Processes::new();
        let me = std::process::id();
        p.refresh(&[me, 0]);
        assert!(p.info(me).alive, "first: {:?}", p.info(me));
        p.refresh(&[me]);
        assert!(p.info(me).alive, "second: {:?}", p.info(me));
        p.refresh(&[me, me]);
        assert!(p.info(me).alive, "third: {:?}", p.info(me));
    }
}
