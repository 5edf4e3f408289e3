#!/usr/bin/env bash
# libffpa as a Meson subproject, the way another Meson project embeds it: a small C project with
# subprojects/libffpa pointing at this source tree asks for dependency('ffpa', fallback: ...),
# must resolve it to the subproject's override (not to an installed ffpa), configure without
# libffpa's own tests and examples, build (kernels for sm_80 and one head dim, to stay short),
# and run a program that reports the version it loaded.
#
# usage: check-subproject.sh SOURCE_ROOT WORK_DIR
# Prints a doctest-style summary line, which the test summary counts.
set -u
source_root=$1
work=$2

passed=0
failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }
summarize() { echo "[doctest] test cases: $((passed + failed)) | $passed passed | $failed failed | 0 skipped"; }

rm -rf "$work"
mkdir -p "$work/app/subprojects"
ln -s "$source_root" "$work/app/subprojects/libffpa"
cat >"$work/app/meson.build" <<'MESON'
project('ffpa_subproject_app', 'c', default_options: ['c_std=c11'])
ffpa = dependency('ffpa', fallback: 'libffpa',
  default_options: ['build_arch=80', 'dev_headdims=128', 'docs=disabled'])
executable('app', 'app.c', dependencies: ffpa)
MESON
cat >"$work/app/app.c" <<'C'
#include <ffpa/ffpa.h>

#include <stdio.h>

/* Prints the version of the library it loaded, and whether the header it was built with allows it. */
int main(void) {
  unsigned version = ffpaGetVersion();
  printf("libffpa %u, header %u\n", version, (unsigned)FFPA_VERSION);
  return FFPA_VERSION_IS_COMPATIBLE(version) ? 0 : 1;
}
C

build=$work/app/build
# --force-fallback-for: the subproject, even where an ffpa is installed.
if ! meson setup "$build" "$work/app" --force-fallback-for=ffpa >"$work/setup.log" 2>&1; then
  cat "$work/setup.log"
  bad "a Meson project configures with libffpa as a subproject"
  summarize
  exit 1
fi
ok "a Meson project configures with libffpa as a subproject"
# What the program links: the subproject's library, through the override of dependency('ffpa').
if ninja -C "$build" -t query app | grep -q "subprojects/libffpa/src/libffpa.so"; then
  ok "dependency('ffpa') is the subproject's library"
else
  grep "Dependency ffpa" "$work/setup.log"
  ninja -C "$build" -t query app
  bad "dependency('ffpa') is the subproject's library"
fi
tests=$(meson introspect "$build" --tests)
if [ "$tests" = "[]" ]; then
  ok "the subproject adds no tests to the project's own"
else
  echo "$tests" | head -c 600
  bad "the subproject adds no tests to the project's own"
fi

# One job: the test suite runs tests side by side, each taking a core.
if ! ninja -C "$build" -j 1 app >"$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log"
  bad "the project's program builds against the subproject's library"
  summarize
  exit 1
fi
ok "the project's program builds against the subproject's library"
# Without LD_LIBRARY_PATH (which may name another build): the program's own run path must lead
# to the subproject's library.
loaded=$(env -u LD_LIBRARY_PATH ldd "$build/app" | grep 'libffpa\.so')
echo "ldd: $loaded"
if grep -q "subprojects/libffpa/src/libffpa.so" <<<"$loaded"; then
  ok "the program loads the subproject's library"
else
  bad "the program loads the subproject's library"
fi
output=$(env -u LD_LIBRARY_PATH "$build/app" 2>&1)
status=$?
expected=$(sed -n 's/^ *version: .\([0-9.]*\).,$/\1/p' "$source_root/meson.build" | head -n 1)
echo "$output (meson.build: $expected)"
IFS=. read -r major minor patch <<<"$expected"
encoded=$((major * 10000 + minor * 100 + patch))  # FFPA_VERSION
if [ "$status" -eq 0 ] && [ "$output" = "libffpa $encoded, header $encoded" ]; then
  ok "the program runs and reports the version of this tree ($output)"
else
  bad "the program runs and reports the version of this tree (exit $status)"
fi

summarize
[ "$failed" -eq 0 ]
