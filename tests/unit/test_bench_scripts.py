"""Every bench script imports and answers --help: a rename in one bench (or in the code they
import) must fail here, not when someone next runs `make bench`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(
    path.stem
    for path in (ROOT / "bench").glob("*.py")
    if path.stem != "__init__" and "__main__" in path.read_text(encoding="utf-8")
)


def test_the_bench_folder_has_scripts() -> None:
    assert {"events", "fleet", "startup", "cluster"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_imports_and_explains_itself(script: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", f"bench.{script}", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout
