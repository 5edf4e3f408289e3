#!/usr/bin/env python3
"""Runs ffpa-bench's command line the way a user would: --help, and bad options, each of which
must be refused with exit status 2 and a message naming the option and what it accepts. None of
this needs a GPU. Prints a doctest-style summary line."""
import subprocess
import sys


def run(binary, *args):
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def main(binary):
    checks = []

    def check(name, condition):
        checks.append((name, bool(condition)))

    rc, out, err = run(binary, "--help")
    check("--help prints the usage on stdout and exits 0", rc == 0 and "--policy NAME=VALUE" in out and
          "--rotate K" in out and "77" in out and not err)

    refused = [
        (["--D", "2000"], '--D: "2000" is not valid; allowed: an integer from 1 to 1024'),
        (["--D", "512:320:64"], "first <= last"),
        (["--dtype", "fp8"], '--dtype: "fp8" is not valid; allowed: f16, bf16'),
        (["--acc", "f64"], "f32, qk_f16, pv_f16, f16"),
        (["--acc", "f16", "--dtype", "bf16"], "the fp16-accumulation modes need --dtype f16"),
        (["--causal", "left"], "none, top-left, bottom-right"),
        (["--layout", "nhd"], "bhnd, bnhd"),
        (["--H", "48", "--Hkv", "5"], "a divisor of --H"),
        (["--iters", "0"], "--iters"),
        (["--rotate", "x"], "--rotate"),
        (["--B"], "--B needs a value"),
        (["--policy", "STAGES"], "NAME=VALUE"),
        (["--policy", "FFPA_POLICY_NO_SUCH_KNOB=1"], "ffpa-info --knobs"),
        (["--policy", "FFPA_POLICY_STAGES=9"], "FFPA_POLICY_STAGES takes "),
        (["--policy", "FFPA_POLICY_ACCUMULATOR=f16"], "use --acc"),
        (["--frobnicate"], 'unknown option "--frobnicate"'),
    ]
    for args, message in refused:
        rc, out, err = run(binary, *args)
        check(f"{' '.join(args)} is refused: exit 2 and \"{message}\"",
              rc == 2 and message in err and err.startswith("ffpa-bench: ") and not out)

    failed = [name for name, ok in checks if not ok]
    for name, ok in checks:
        print(("ok: " if ok else "FAILED: ") + name)
    print(f"[doctest] test cases: {len(checks)} | {len(checks) - len(failed)} passed | "
          f"{len(failed)} failed | 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
