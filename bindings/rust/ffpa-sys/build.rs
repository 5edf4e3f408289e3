//! Finds libffpa with pkg-config and tells cargo how to link it.
//!
//! Honours `PKG_CONFIG_PATH` (an installed `ffpa.pc`, or `<build>/meson-uninstalled` for a Meson
//! build tree) and the other variables the `pkg-config` program reads.

use std::env;
use std::path::{Path, PathBuf};
use std::process;

fn main() {
    println!("cargo:rerun-if-changed=src/bindings.rs");
    let (major, minor) = header_version();

    // The rule of FFPA_VERSION_IS_COMPATIBLE: the header's major version, and a minor version at
    // least the header's. The dynamic linker enforces the major; this catches an old library early.
    let oldest = format!("{major}.{minor}");
    let next_major = format!("{}", major + 1);
    let library = match pkg_config::Config::new()
        .range_version(oldest.as_str()..next_major.as_str())
        .probe("ffpa")
    {
        Ok(library) => library,
        Err(error) => {
            eprintln!("ffpa-sys: pkg-config found no libffpa {oldest} <= version < {next_major}.");
            eprintln!("Point PKG_CONFIG_PATH at the directory that holds ffpa.pc:");
            eprintln!("  installed library: PKG_CONFIG_PATH=<prefix>/lib/<arch>/pkgconfig");
            eprintln!("  Meson build tree:  PKG_CONFIG_PATH=<build>/meson-uninstalled");
            eprintln!("pkg-config said: {error}");
            process::exit(1);
        }
    };

    // Tests and examples of a build tree or an unusual prefix should run without LD_LIBRARY_PATH.
    // The directories reach dependent crates as DEP_FFPA_RPATH, since link arguments do not.
    let rpath: Vec<&PathBuf> =
        library.link_paths.iter().filter(|dir| !is_system_dir(dir)).collect();
    for dir in &rpath {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    if let Ok(joined) = env::join_paths(&rpath) {
        println!("cargo:rpath={}", joined.to_string_lossy());
    }
    if let Ok(joined) = env::join_paths(&library.include_paths) {
        println!("cargo:include={}", joined.to_string_lossy());
    }
}

/// FFPA_VERSION_MAJOR and FFPA_VERSION_MINOR of the header the bindings were generated from.
fn header_version() -> (u32, u32) {
    let bindings = include_str!("src/bindings.rs");
    let read = |name: &str| -> u32 {
        let prefix = format!("pub const {name}: u32 = ");
        bindings
            .lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .and_then(|rest| rest.trim_end_matches(';').parse().ok())
            .unwrap_or_else(|| panic!("src/bindings.rs has no `{prefix}N;` line"))
    };
    (read("FFPA_VERSION_MAJOR"), read("FFPA_VERSION_MINOR"))
}

/// Directories the dynamic linker searches anyway: an rpath to them would only add noise.
fn is_system_dir(dir: &Path) -> bool {
    let system = ["/lib", "/lib64", "/usr/lib", "/usr/lib64"];
    let multiarch_parent = ["/lib", "/usr/lib"];
    system.iter().any(|system| dir == Path::new(system))
        || (dir.to_string_lossy().contains("-linux-")
            && dir.parent().map_or(false, |parent| {
                multiarch_parent.iter().any(|system| parent == Path::new(system))
            }))
}
