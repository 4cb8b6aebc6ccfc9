//! Build script: for a Windows target, compiles the application icon
//! (`assets/lrbc-inspector.ico`) and the version information into the resources of
//! `lrbc-inspector.exe`, with mingw's `windres` (the `*-pc-windows-gnu` targets) or
//! the Windows SDK's `rc.exe` (the MSVC targets). For any other target it does nothing
//! and needs nothing installed.
//!
//! The build script runs on the host, so the target is read from
//! `CARGO_CFG_TARGET_OS`, never from `cfg!(windows)`.

use std::env;
use std::io;
use std::path::Path;

/// The icon, relative to the package root (made by `assets/generate`).
const ICON: &str = "assets/lrbc-inspector.ico";
/// The binary that carries the resources.
const BINARY: &str = "lrbc-inspector";
/// US English, the language of the version strings.
const LANGUAGE_EN_US: u16 = 0x0409;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed={ICON}");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("windows") {
        return;
    }
    // Where winresource looks for the resource compiler.
    for var in ["WINDRES", "AR", "CROSS_COMPILE", "RC_PATH"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    if let Err(message) = compile_resources() {
        println!("cargo::error={message}");
    }
}

/// Writes the resource script (icon, version information) and compiles it into the
/// link of the binary.
fn compile_resources() -> Result<(), String> {
    let root = env::var("CARGO_MANIFEST_DIR").map_err(|e| format!("CARGO_MANIFEST_DIR: {e}"))?;
    let icon = Path::new(&root).join(ICON);
    let icon = icon
        .to_str()
        .ok_or_else(|| format!("the icon's path is not UTF-8: {}", icon.display()))?;
    let version = env::var("CARGO_PKG_VERSION").map_err(|e| format!("CARGO_PKG_VERSION: {e}"))?;
    let license = env::var("CARGO_PKG_LICENSE").unwrap_or_default();
    let description = env::var("CARGO_PKG_DESCRIPTION").unwrap_or_default();

    let mut res = winresource::WindowsResource::new();
    res.set_language(LANGUAGE_EN_US)
        // The first icon resource (ID 1): the one Explorer shows for the file.
        .set_icon(icon)
        .set("ProductName", "lrbc-inspector")
        .set("FileDescription", "LRBC Inspector")
        .set("ProductVersion", &version)
        .set("FileVersion", &version)
        .set("OriginalFilename", &format!("{BINARY}.exe"))
        .set("InternalName", BINARY)
        .set("LegalCopyright", &format!("Licensed {license}"))
        .set("Comments", &description);
    res.compile_for(BINARY).map_err(|e| explain(&e))
}

/// The error of the resource compiler, with what to install when it is missing.
fn explain(e: &io::Error) -> String {
    let msvc = env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("msvc");
    if e.kind() != io::ErrorKind::NotFound {
        return format!("compiling the Windows resources (icon, version information) failed: {e}");
    }
    if msvc {
        format!(
            "the resource compiler rc.exe was not found ({e}): install the Windows SDK \
             (Visual Studio Installer, \"Windows SDK\"), build from a Developer Command \
             Prompt, or name rc.exe in RC_PATH"
        )
    } else {
        format!(
            "the resource compiler (mingw's windres, e.g. x86_64-w64-mingw32-windres) was \
             not found ({e}): install it (Debian/Ubuntu: apt-get install \
             binutils-mingw-w64-x86-64, which gcc-mingw-w64-x86-64 pulls in; MSYS2: \
             pacman -S mingw-w64-x86_64-binutils) or name it in WINDRES"
        )
    }
}
