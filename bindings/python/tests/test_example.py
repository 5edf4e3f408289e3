"""The example program runs: on a GPU with PyTorch it checks attention against PyTorch, anywhere
else it prints the plan for a described GPU."""
import os
import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "attention.py"


def test_the_example_runs():
    env = dict(os.environ, PYTHONPATH=str(EXAMPLE.parents[1]))
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "libffpa " in done.stdout
    assert "kernel: " in done.stdout or "relative error" in done.stdout
