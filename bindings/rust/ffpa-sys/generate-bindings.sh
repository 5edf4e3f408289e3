#!/usr/bin/env bash
# Regenerates src/bindings.rs from the public header with the bindgen CLI (Debian: bindgen).
#
#   generate-bindings.sh            rewrite src/bindings.rs
#   generate-bindings.sh --check    fail if src/bindings.rs differs from what the header gives
#
# The bindings are generated ahead of time and kept in the tree so that building the crate needs
# neither bindgen nor libclang. FFPA_HEADER overrides the header (default: the one of this tree).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# rustfmt (run by bindgen) takes its settings from the working directory: make them fixed.
cd "$here"
header=${FFPA_HEADER:-$here/../../../include/ffpa/ffpa.h}
target=$here/src/bindings.rs

mode=write
case ${1:-} in
  "") ;;
  --check) mode=check ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

for tool in bindgen rustfmt; do
  if ! command -v "$tool" >/dev/null; then
    echo "generate-bindings: '$tool' not found (bindgen: apt-get install bindgen; rustfmt: rustup component add rustfmt)" >&2
    exit 3
  fi
done

generated=$(mktemp)
trap 'rm -f "$generated"' EXIT

# Newtype enums: a C value the Rust side does not know (a newer library) stays representable,
# where a Rust enum would make it undefined behaviour. The glibc typedefs behind <stdint.h> are
# blocklisted: the items use Rust's fixed-width types, and those aliases differ between hosts.
bindgen "$header" \
  --output "$generated" \
  --allowlist-function 'ffpa.*' \
  --allowlist-type 'ffpa.*' \
  --allowlist-var 'FFPA_.*' \
  --blocklist-type '__u?int(8|16|32|64)_t' \
  --newtype-enum 'ffpa.*' \
  --size_t-is-usize \
  --raw-line '// Generated from include/ffpa/ffpa.h by generate-bindings.sh; do not edit.' \
  -- -std=c11

if [ "$mode" = check ]; then
  if ! diff -u "$target" "$generated"; then
    echo "generate-bindings: $target is out of date with $header; run $0 and commit the result" >&2
    exit 1
  fi
  echo "generate-bindings: $(basename "$target") matches $(basename "$header")"
else
  chmod 644 "$generated"
  mv "$generated" "$target"
  trap - EXIT
  echo "generate-bindings: wrote $target"
fi
