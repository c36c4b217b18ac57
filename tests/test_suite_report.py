"""A suite run without redis-server says loudly how many integration tests it skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_a_run_without_redis_server_ends_with_a_loud_count_of_the_skipped_integration_tests():
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PATH"] = str(Path(sys.executable).parent)  # no redis-server on it
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_monitoring.py"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert run.returncode == 0, run.stdout[-2000:]
    banner, advice, counts = run.stdout.rstrip().splitlines()[-3:]  # the banner comes just before the counts
    assert "2 INTEGRATION TESTS SKIPPED: redis-server is not installed" in banner
    assert "apt-get install redis-server" in advice and counts.startswith("2 skipped")
