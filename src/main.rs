//! The `lrbc-inspector` program: the window, or the subcommand its arguments name.
//!
//! A Windows GUI program: no console window when started from Explorer. Started from a
//! console, `cli::main` attaches to it for the command-line output.
#![windows_subsystem = "windows"]

fn main() {
    std::process::exit(lrbc_inspector::cli::main());
}
