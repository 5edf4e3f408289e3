#!/usr/bin/env bash
# Compiles the examples outside Meson, the way an application does: flags from
# `pkg-config --cflags --libs ffpa` (the uninstalled ffpa.pc that Meson writes into
# <build>/meson-uninstalled) plus the CUDA runtime named explicitly, since CUDA ships no .pc
# file. Each program must then link, load and run: success (0) and "no usable GPU" (77) pass.
#
# usage: check-pkg-config.sh BUILD_ROOT EXAMPLES_SOURCE_DIR CUDA_ROOT WORK_DIR
# Prints a doctest-style summary line, which the test summary counts.
set -u

if [ $# -ne 4 ]; then
  echo "usage: $0 BUILD_ROOT EXAMPLES_SOURCE_DIR CUDA_ROOT WORK_DIR" >&2
  exit 2
fi
build_root=$1
examples_dir=$2
cuda_root=$3
work_dir=$4

passed=0
failed=0
skipped=0
readonly checks=2

summarize() {
  echo "[doctest] test cases: $checks | $passed passed | $failed failed | $skipped skipped"
}

if ! command -v pkg-config >/dev/null; then
  echo "pkg-config is not installed: nothing to check"
  skipped=$checks
  summarize
  exit 77
fi

export PKG_CONFIG_PATH="$build_root/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if ! ffpa_flags=$(pkg-config --cflags --libs ffpa); then
  echo "FAILED: pkg-config finds no usable ffpa.pc in $build_root/meson-uninstalled"
  failed=$checks
  summarize
  exit 1
fi
echo "pkg-config --cflags --libs ffpa: $ffpa_flags"
cuda_flags="-I$cuda_root/include -L$cuda_root/lib64 -lcudart"
# The programs are not installed: let the dynamic loader search where the linker found libffpa.
for flag in $(pkg-config --libs-only-L ffpa); do
  LD_LIBRARY_PATH="${flag#-L}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH

mkdir -p "$work_dir"

# check NAME COMPILER STANDARD SOURCE
check() {
  local name=$1 compiler=$2 standard=$3 source=$4
  local program="$work_dir/$name"
  echo "--- $name: $compiler $standard $source"
  # Word splitting of the flag strings is intended: they hold several arguments.
  # shellcheck disable=SC2086
  if ! "$compiler" "$standard" -Wall -Wextra -Werror -o "$program" "$source" \
      $ffpa_flags $cuda_flags; then
    echo "FAILED: $name does not compile and link against ffpa.pc"
    failed=$((failed + 1))
    return
  fi
  "$program"
  local status=$?
  if [ "$status" -eq 0 ] || [ "$status" -eq 77 ]; then
    echo "passed: $name (exit status $status)"
    passed=$((passed + 1))
  else
    echo "FAILED: $name exited with status $status"
    failed=$((failed + 1))
  fi
}

check attention_forward "${CC:-cc}" -std=c11 "$examples_dir/c/attention_forward.c"
check attention_forward_backward "${CXX:-c++}" -std=c++17 \
  "$examples_dir/cpp/attention_forward_backward.cpp"

summarize
[ "$failed" -eq 0 ]
