"""The test runner's memory guard (`conftest.py` at the repository root): a child process of the test run that
grows past the limit is killed by the guard, and the failing test says so (not just "Kernel died")."""

from __future__ import annotations

import os
import subprocess
import sys

import nbformat

from conftest import ROOT

# A child that holds 600 MB: over a 0.3 GB limit, under any machine's.
GROW = "import time; x = b'x' * (600 * 10**6); time.sleep(20)"


def _pytest(tmp_path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    # `-p conftest`: the repository's root conftest (the guard) as a plugin, for files outside the repository.
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_a_subprocess_over_the_limit_is_killed_and_named(tmp_path):
    (tmp_path / "test_grow.py").write_text(
        "import subprocess, sys\n"
        "def test_grows():\n"
        f"    assert subprocess.run([sys.executable, '-c', {GROW!r}]).returncode == 0\n"
        "def test_small():\n"
        "    assert subprocess.run([sys.executable, '-c', 'pass']).returncode == 0\n")
    r = _pytest(tmp_path, "test_grow.py", "--memory-limit-gb", "0.3")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "killed by the test runner's memory guard" in out and "over the limit of 0.30 GB" in out, out
    assert "FAILED test_grow.py::test_grows - MEMORY: process" in out, out


def test_a_notebook_kernel_over_the_limit_is_reported_as_killed_for_memory(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(GROW.replace("; ", "\n"))]
    nbformat.write(nb, tmp_path / "grow.ipynb")
    r = _pytest(tmp_path, "--nbmake", "grow.ipynb", "--memory-limit-gb", "0.3")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "memory guard: killed for memory" in out and "ipykernel" in out, out
    assert "FAILED grow.ipynb::grow.ipynb - MEMORY: process" in out, out
