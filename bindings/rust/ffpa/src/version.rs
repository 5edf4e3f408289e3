//! Versions of the library and of the header these bindings were generated from.

use std::fmt;

use crate::sys;

/// A libffpa version, encoded in C as `MAJOR * 10000 + MINOR * 100 + PATCH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Changes only with an incompatible change of the interface or the ABI.
    pub major: u32,
    /// Grows when functions, enumerators or knobs are added.
    pub minor: u32,
    /// Fixes that change no interface.
    pub patch: u32,
}

impl Version {
    /// The version of the header these bindings were generated from (`FFPA_VERSION`).
    pub const HEADER: Version = Version::from_encoded(sys::FFPA_VERSION);

    /// Decodes `MAJOR * 10000 + MINOR * 100 + PATCH`.
    pub const fn from_encoded(encoded: u32) -> Version {
        Version { major: encoded / 10000, minor: encoded % 10000 / 100, patch: encoded % 100 }
    }

    /// `MAJOR * 10000 + MINOR * 100 + PATCH`.
    pub const fn encoded(self) -> u32 {
        self.major * 10000 + self.minor * 100 + self.patch
    }

    /// True when a library of this version can serve these bindings: the same major version and
    /// a minor version at least the header's (`FFPA_VERSION_IS_COMPATIBLE`).
    pub const fn serves_header(self) -> bool {
        self.major == Version::HEADER.major && self.minor >= Version::HEADER.minor
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The version of the loaded library (`ffpaGetVersion`), which may differ from
/// [`Version::HEADER`].
pub fn version() -> Version {
    // SAFETY: no arguments, no preconditions.
    Version::from_encoded(unsafe { sys::ffpaGetVersion() })
}

/// True when the loaded library can serve these bindings (see [`Version::serves_header`]).
///
/// The dynamic linker already refuses a library of another major version (the SONAME carries
/// it); this checks the minor version.
pub fn is_compatible() -> bool {
    version().serves_header()
}

/// How the loaded library was built: version, CUDA version, architectures, head dimensions and
/// stage counts, on one line (`ffpaGetBuildInfo`). Meant for bug reports and logs.
pub fn build_info() -> String {
    // SAFETY: returns a static NUL-terminated string, never null.
    unsafe { crate::text::from_c(sys::ffpaGetBuildInfo()) }
}
