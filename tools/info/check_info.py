#!/usr/bin/env python3
"""Runs ffpa-info the way a user would and checks what it prints. Needs no GPU (without one it
plans for a described device). Prints a doctest-style summary line."""
import os
import re
import subprocess
import sys


def run(binary, *args, env=None):
    environment = dict(os.environ, **(env or {}))
    done = subprocess.run([binary, *args], capture_output=True, text=True, env=environment)
    return done.returncode, done.stdout + done.stderr


def main(binary):
    checks = []

    def check(name, condition):
        checks.append((name, bool(condition)))

    rc, out = run(binary)
    check("the default report names the version, the build and the device", rc == 0 and
          "libffpa " in out and "build: libffpa" in out and "device: " in out)
    rc, out = run(binary, "--policy", env={"ENABLE_FFPA_PREFETCH_QKV": "0", "FFPA_LOGGER_LEVEL": "info"})
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  FFPA_POLICY_")}
    check("--policy shows values and their sources", rc == 0 and
          rows.get("FFPA_POLICY_PREFETCH_QKV", [])[-1:] == ["environment"] and
          rows.get("FFPA_POLICY_STAGES", [])[-1:] == ["default"] and
          "info" in rows.get("FFPA_POLICY_LOG_LEVEL", []))
    rc, out = run(binary, "--plan", "b=2,hq=16,hkv=4,nq=300,d=576,dv=512,causal=bottom-right,layout=bnhd",
                  "--device", "sm80")
    check("--plan explains the forward and backward plans on a described device", rc == 0 and
          "sm_80" in out and "forward plan:" in out and "backward plan:" in out and
          "problem: forward bf16 B=2 Hq=16 Hkv=4 Nq=300 Nkv=300 Dqk=576 Dv=512 causal=bottom-right" in out and
          # The fast backward where the build compiles a head dim >= 576, else the reference.
          re.search(r"kernel: (sm80\.backward\.bf16\.d\d+|reference\.cublaslt\.backward)", out) is not None)
    rc, out = run(binary, "--plan", "b=4,hq=32,hkv=8,nq=300,nkv=4096,d=128,causal=bottom-right,key-lengths=yes",
                  "--device", "sm80")
    check("--plan key-lengths=yes plans with per-batch key counts", rc == 0 and "key_lengths" in out and
          re.search(r"kernel: (sm80\.backward\.bf16\.d128|reference\.cublaslt\.backward)", out) is not None)
    _, build = run(binary)
    hopper = re.search(r"architectures [0-9a-z,]*\b90a\b", build) and re.search(r"head dims [0-9,]*\b512\b", build)
    rc, out = run(binary, "--plan", "b=4,hq=32,hkv=8,nq=300,nkv=4096,d=512,causal=bottom-right,key-lengths=yes",
                  "--device", "sm90")
    # The Hopper gradient kernels read the counts too, where the build compiles them at d 512.
    expected = r"sm90\.backward\.bf16\.dq512x2\.dkdv512x2" if hopper else r"\S+"
    check("--plan key-lengths=yes plans the Hopper backward on sm90", rc == 0 and "key_lengths" in out and
          re.search(r"backward plan:.*\n.*\n  kernel: " + expected + r"\n", out) is not None)
    rc, out = run(binary, "--plan", "key-lengths=maybe")
    check("--plan rejects key-lengths other than no or yes", rc == 2 and "no, yes" in out)
    rc, out = run(binary, "--plan", "hq=12,hkv=5")
    check("--plan reports a refused problem with the library's status", rc == 1 and
          "FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH" in out and "multiple" in out)
    rc, out = run(binary, "--plan", "b=zero")
    check("--plan rejects a malformed problem as bad usage", rc == 2 and "not a positive integer" in out)
    rc, out = run(binary, "--device", "sm42")
    check("--device lists the known devices", rc == 2 and "sm90" in out)
    rc, out = run(binary, env={"FFPA_STAGES": "9"})
    check("a malformed environment variable is an error naming it", rc == 1 and "FFPA_STAGES" in out)
    rc, out = run(binary, "--knobs")
    check("--knobs lists every knob", rc == 0 and out.count("FFPA_POLICY_") >= 23)

    failed = [name for name, ok in checks if not ok]
    for name, ok in checks:
        print(("ok: " if ok else "FAILED: ") + name)
    print(f"[doctest] test cases: {len(checks)} | {len(checks) - len(failed)} passed | {len(failed)} failed | 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
