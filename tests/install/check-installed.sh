#!/usr/bin/env bash
# Installs the build into a temporary root and builds everything an application would against
# the INSTALLED library, through pkg-config only: the installed C and C++ example sources, the
# Rust and Go bindings' examples (when cargo and go are present). Each program must link, load
# and run: success (0) and "no usable GPU" (77, or the bindings' own no-GPU message) pass.
#
# usage: check-installed.sh BUILD_ROOT SOURCE_ROOT CUDA_ROOT WORK_DIR
# Prints a doctest-style summary line, which the test summary counts.
set -u
build_root=$1
source_root=$2
cuda_root=$3
work=$4

passed=0
failed=0
skipped=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }
skip() { echo "skipped: $1"; skipped=$((skipped + 1)); }
# ran NAME STATUS: a program that ran to success, or stopped for lack of a GPU, passes.
ran() { if [ "$2" -eq 0 ] || [ "$2" -eq 77 ]; then ok "$1 (exit $2)"; else bad "$1 (exit $2)"; fi; }

rm -rf "$work"
mkdir -p "$work"
root=$work/root
if ! meson install -C "$build_root" --destdir "$root" --no-rebuild --quiet >"$work/install.log" 2>&1; then
  cat "$work/install.log"
  bad "meson install"
  echo "[doctest] test cases: $((passed + failed + skipped)) | $passed passed | $failed failed | $skipped skipped"
  exit 1
fi
ok "meson install into a temporary root"

pc=$(find "$root" -name ffpa.pc | head -n 1)
if [ -z "$pc" ]; then
  bad "ffpa.pc is installed"
else
  ok "ffpa.pc is installed ($pc)"
  # The installed .pc names the final prefix; the sysroot variable maps it into the staging root.
  export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$(dirname "$pc")
  libdir=$(dirname "$(dirname "$pc")")
  export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

for file in include/ffpa/ffpa.h bin/ffpa-info share/doc/libffpa/examples/c/attention_forward.c \
            share/doc/libffpa/examples/cpp/attention_forward_backward.cpp; do
  if [ -n "$(find "$root" -path "*/$file" | head -n 1)" ]; then ok "installed: $file"; else bad "installed: $file"; fi
done
if [ -f "$build_root/docs/html/index.html" ]; then  # a build with the documentation
  if [ -n "$(find "$root" -path '*/share/doc/libffpa/html/index.html' | head -n 1)" ]; then
    ok "installed: the HTML documentation"
  else
    bad "installed: the HTML documentation"
  fi
fi
so=$(find "$root" -name 'libffpa.so.0' | head -n 1)
if [ -n "$so" ] && readelf -d "$so" | grep -q 'Library soname: \[libffpa.so.0\]'; then
  ok "installed: libffpa.so.0 with its SONAME"
else
  bad "installed: libffpa.so.0 with its SONAME"
fi

if [ -n "${PKG_CONFIG_PATH:-}" ]; then
  flags=$(pkg-config --cflags --libs ffpa)
  echo "pkg-config --cflags --libs ffpa: $flags"
  cuda="-I$cuda_root/include -L$cuda_root/lib64 -lcudart"
  examples=$(find "$root" -path '*/share/doc/libffpa/examples' | head -n 1)
  # shellcheck disable=SC2086  # the flags are word lists
  if cc -std=c11 -Wall -Werror "$examples/c/attention_forward.c" $flags $cuda -o "$work/example-c"; then
    "$work/example-c" >"$work/example-c.log" 2>&1
    ran "installed C example" $?
  else
    bad "installed C example compiles through pkg-config"
  fi
  # shellcheck disable=SC2086
  if c++ -std=c++17 -Wall -Werror "$examples/cpp/attention_forward_backward.cpp" $flags $cuda -o "$work/example-cpp"; then
    "$work/example-cpp" >"$work/example-cpp.log" 2>&1
    ran "installed C++ example" $?
  else
    bad "installed C++ example compiles through pkg-config"
  fi
  info=$(find "$root" -path '*/bin/ffpa-info' | head -n 1)
  if "$info" --knobs >/dev/null 2>&1; then ok "installed ffpa-info runs"; else bad "installed ffpa-info runs"; fi

  for language in rust go python; do
    script=$source_root/bindings/$language/check-installed
    if [ ! -x "$script" ]; then
      skip "$language bindings: no bindings/$language/check-installed"
    else
      "$script" "$work/$language" >"$work/$language.log" 2>&1
      status=$?
      tail -n 5 "$work/$language.log"
      case $status in
        0) ok "$language bindings build and run against the installed library" ;;
        77) skip "$language bindings: toolchain not installed" ;;
        *) bad "$language bindings build and run against the installed library" ;;
      esac
    fi
  done
fi

echo "[doctest] test cases: $((passed + failed + skipped)) | $passed passed | $failed failed | $skipped skipped"
[ "$failed" -eq 0 ]
