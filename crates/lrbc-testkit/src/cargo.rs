//! Cargo run from a program that cargo started (a test, or a benchmark under `cargo run`).

use std::process::Command;

/// `cargo` (the one that started this program, from `CARGO`), without the variables cargo
/// sets for the programs it runs. Build scripts watch some of those (`ring`'s watches
/// `CARGO_MANIFEST_DIR` and `CARGO_PKG_*`): a build that saw them would be rebuilt by
/// the next `cargo` run from a shell, and that one again by the next run from here.
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else {
            continue;
        };
        if set_by_cargo_for_its_programs(name) {
            command.env_remove(name);
        }
    }
    command
}

/// Whether cargo sets the variable `name` for the programs it runs (tests, binaries,
/// build scripts), rather than taking it from its own environment.
fn set_by_cargo_for_its_programs(name: &str) -> bool {
    const PREFIXES: [&str; 4] = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CFG_", "CARGO_BIN_"];
    const NAMES: [&str; 5] = [
        "CARGO_CRATE_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "OUT_DIR",
        "CARGO_RUSTC_CURRENT_DIR",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || NAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_cargo_sets_for_a_test_are_left_out_and_its_own_settings_kept() {
        for name in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "OUT_DIR",
        ] {
            assert!(set_by_cargo_for_its_programs(name), "{name}");
        }
        for name in [
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO",
        ] {
            assert!(!set_by_cargo_for_its_programs(name), "{name}");
        }
        // This test runs under cargo, which set the first two: the command has them removed.
        let removed: Vec<_> = cargo()
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(
            removed.iter().any(|k| k == "CARGO_MANIFEST_DIR"),
            "{removed:?}"
        );
        assert!(removed.iter().any(|k| k == "CARGO_PKG_NAME"), "{removed:?}");
    }
}
