"""mypy passes on the pure packages (the files listed under [tool.mypy] in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_mypy_passes_on_the_pure_packages():
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir", str(ROOT / ".mypy_cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
