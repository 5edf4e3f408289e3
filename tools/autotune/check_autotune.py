#!/usr/bin/env python3
"""ffpa-autotune's command line as a user meets it, on any machine: --help, refused options
(exit 2 and a message), merging tuned-config files (and refusing to merge mismatched ones or to
overwrite), and tuning without a GPU (exit 77). Prints doctest's summary line."""
import json
import os
import subprocess
import sys
import tempfile


def run(binary, *args, env=None):
    done = subprocess.run([binary, *args], capture_output=True, text=True, env=env, timeout=120)
    return done.returncode, done.stdout + done.stderr


def tuned_file(device="NVIDIA H100 80GB HBM3", mode="fast", head_dim=512, stages=2):
    return {"schema_version": 1, "device": {"name": device, "compute_capability": "9.0"}, "autotune_mode": mode,
            "entries": [{"direction": "forward", "kernel": "sm80.forward", "dtype": "bf16", "head_dim": head_dim,
                         "seqlen_q": 4096, "seqlen_kv": 4096, "config": {"stages": stages}}]}


def main(binary):
    checks = []

    def check(name, ok):
        checks.append((name, ok))

    rc, out = run(binary, "--help")
    check("--help describes tuning and merging", rc == 0 and "--mode fast|max" in out and "merge FILE" in out)
    rc, out = run(binary, "--mode", "slow")
    check("a bad value is refused naming the option", rc == 2 and "--mode: \"slow\" is not one of fast, max" in out)
    rc, out = run(binary, "--frobnicate")
    check("an unknown option is refused", rc == 2 and "unknown option --frobnicate" in out)

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, content in enumerate([tuned_file(head_dim=320), tuned_file(head_dim=512),
                                     tuned_file(head_dim=512, stages=1)]):
            path = os.path.join(tmp, f"part{i}.json")
            with open(path, "w") as f:
                json.dump(content, f)
            paths.append(path)
        merged = os.path.join(tmp, "merged.json")
        rc, out = run(binary, "merge", *paths, "-o", merged)
        ok = rc == 0 and "merged 3 files: 2 entries" in out
        if ok:
            with open(merged) as f:
                entries = json.load(f)["entries"]
            ok = [e["head_dim"] for e in entries] == [320, 512] and entries[1]["config"] == {"stages": 1}
        check("merge combines files, later ones winning for the same task", ok)
        rc, out = run(binary, "merge", *paths, "-o", merged)
        check("merge refuses to overwrite without --overwrite", rc == 1 and "--overwrite" in out)
        rc, out = run(binary, "merge", *paths, "-o", merged, "--overwrite")
        check("merge --overwrite replaces the file", rc == 0)

        other = os.path.join(tmp, "a100.json")
        with open(other, "w") as f:
            json.dump(tuned_file(device="NVIDIA A100-SXM4-80GB"), f)
        rc, out = run(binary, "merge", paths[0], other, "-o", os.path.join(tmp, "x.json"))
        check("merge refuses files of another device", rc == 1 and "file 2: device" in out)
        broken = os.path.join(tmp, "broken.json")
        with open(broken, "w") as f:
            f.write('{"schema_version": 1, "entries": [')
        rc, out = run(binary, "merge", paths[0], broken, "-o", os.path.join(tmp, "y.json"))
        check("merge names a malformed file", rc == 1 and "broken.json: not valid JSON" in out)

        env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
        rc, out = run(binary, "--output-dir", tmp, env=env)
        check("tuning without a GPU exits 77 and says so", rc == 77 and "no usable CUDA GPU" in out)

    failed = [name for name, ok in checks if not ok]
    for name, ok in checks:
        print(("ok: " if ok else "FAILED: ") + name)
    print(f"[doctest] test cases: {len(checks)} | {len(checks) - len(failed)} passed | {len(failed)} failed | 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
