//! Lets this crate's tests and examples find a libffpa outside the system directories (a Meson
//! build tree, a private prefix) without LD_LIBRARY_PATH. ffpa-sys found the directories with
//! pkg-config; its own link arguments do not reach this crate, so it passes them as metadata.

use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_FFPA_RPATH");
    if let Some(dirs) = env::var_os("DEP_FFPA_RPATH") {
        for dir in env::split_paths(&dirs) {
            println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{}", dir.display());
            println!("cargo:rustc-link-arg-examples=-Wl,-rpath,{}", dir.display());
        }
    }
}
