#!/usr/bin/env bash
# Installs the build into a temporary root and builds everything an application would against
# the INSTALLED library, through pkg-config and CMake's find_package: the installed C and C++
# example sources (both ways; CMake when it is installed), the Rust and Go bindings' examples
# (when cargo and go are present). Each program must link, load
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

# find_package_ffpa REQUEST PREFIX: configures a project that asks for ffpa REQUEST (a version, a range,
# or nothing) under PREFIX and prints where the package's target points; fails where CMake refuses.
find_package_ffpa() {
  local request=$1 prefix=$2 dir
  dir=$work/cmake-probe/$(printf '%s' "${request:-any}" | tr -c 'A-Za-z0-9.' '_')
  mkdir -p "$dir"
  cat >"$dir/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.19)
# A language, as in any real project: CMake searches lib/<multiarch> only once it knows the target.
project(ffpa_probe LANGUAGES C)
# Only under FFPA_PREFIX: an ffpa installed on this machine must not answer for the staged one.
find_package(ffpa ${FFPA_REQUEST} CONFIG REQUIRED NO_DEFAULT_PATH PATHS "${FFPA_PREFIX}")
get_target_property(location ffpa::ffpa IMPORTED_LOCATION)
get_target_property(includes ffpa::ffpa INTERFACE_INCLUDE_DIRECTORIES)
message(STATUS "ffpa ${ffpa_VERSION}: ${location} ${includes}")
CMAKE
  rm -rf "$dir/build"  # no cache: a cached ffpa_DIR would answer for the prefix
  cmake -S "$dir" -B "$dir/build" -DFFPA_REQUEST="$request" -DFFPA_PREFIX="$prefix" 2>&1
}

# finds_ffpa PREFIX PATTERN CHECK: find_package(ffpa) under PREFIX succeeds and says PATTERN.
finds_ffpa() {
  local out
  out=$(find_package_ffpa "" "$1")
  if [ $? -eq 0 ] && grep -q "$2" <<<"$out"; then
    ok "CMake package: $3"
  else
    echo "$out"
    bad "CMake package: $3"
  fi
}

# check_cmake_package EXAMPLES: the installed CMake package, as a CMake project uses it: its files,
# the versions it accepts, that its target points into the installation wherever that was copied
# (here: the staging root), and the installed examples built with it and run.
check_cmake_package() {
  local examples=$1 header prefix version major minor out
  local package
  package=$(find "$root" -path '*/cmake/ffpa/ffpa-config.cmake' | head -n 1)
  if [ -z "$package" ] || [ ! -f "$(dirname "$package")/ffpa-config-version.cmake" ]; then
    bad "CMake package: ffpa-config.cmake and ffpa-config-version.cmake are installed"
    return
  fi
  ok "CMake package installed ($(dirname "$package"))"
  header=$(find "$root" -path '*/include/ffpa/ffpa.h' | head -n 1)
  prefix=$(dirname "$(dirname "$(dirname "$header")")")
  version=$(pkg-config --modversion ffpa)
  major=${version%%.*}
  minor=${version#*.}
  minor=${minor%%.*}

  finds_ffpa "$prefix" "ffpa $version: $root/.*/libffpa.so.$version $root/" \
    "find_package(ffpa) finds ffpa::ffpa inside the installation"
  # Found through a symlinked library directory (/lib -> /usr/lib on merged-/usr systems): a
  # prefix holding only that link must still lead to the installation the link points into.
  mkdir -p "$work/linked-prefix"
  ln -sfn "$prefix/lib" "$work/linked-prefix/lib"
  finds_ffpa "$work/linked-prefix" "ffpa $version: $prefix/lib/" \
    "found through a symlinked lib directory, it points into the real prefix"
  local request newer=$major.$((minor + 1))
  for request in "$major.$minor" "$major" "$version" "$major.0...<$((major + 1))" "$major.$minor...$newer"; do
    if out=$(find_package_ffpa "$request" "$prefix"); then
      ok "CMake package: version $version satisfies $request"
    else
      echo "$out"
      bad "CMake package: version $version satisfies $request"
    fi
  done
  for request in "$newer" "$((major + 1)).0" "$newer...$major.$((minor + 5))"; do
    if out=$(find_package_ffpa "$request" "$prefix"); then
      echo "$out"
      bad "CMake package: version $version refuses $request"
    elif grep -q "ffpa-config.cmake, version: $version" <<<"$out"; then
      ok "CMake package: version $version refuses $request"
    else
      echo "$out"
      bad "CMake package: version $version refuses $request (with CMake's message naming the version)"
    fi
  done

  local build=$work/cmake-examples
  if cmake -S "$examples/cmake" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" -DCUDAToolkit_ROOT="$cuda_root" \
       -DCMAKE_C_FLAGS=-Werror -DCMAKE_CXX_FLAGS=-Werror >"$work/cmake-examples.log" 2>&1 &&
     cmake --build "$build" >>"$work/cmake-examples.log" 2>&1; then
    local program
    for program in attention_forward attention_forward_backward; do
      "$build/$program" >"$work/cmake-$program.log" 2>&1
      ran "installed example $program built with CMake" $?
    done
  else
    cat "$work/cmake-examples.log"
    bad "installed examples build with CMake through find_package(ffpa)"
  fi
}

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
  if command -v cmake >/dev/null; then
    check_cmake_package "$examples"
  else
    skip "CMake package: cmake is not installed"
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
