"""The README's Python (httpx) quick start runs as written against a live c2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.harness import REPO, C2Process

MARKER = "<!-- python-quickstart -->"


def _example() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    after = readme.split(MARKER, 1)[1]
    match = re.match(r"\s*```python\n(.*?)```", after, re.S)
    assert match is not None, "the python quick start block follows its marker"
    return match.group(1)


def test_readme_python_quickstart_streams_a_turn(tmp_path: Path):
    """The example creates a demo session, prompts it and prints the reply until turn_ended."""
    server = C2Process(tmp_path / "home")
    server.start()
    try:
        script = tmp_path / "quickstart.py"
        script.write_text(_example(), encoding="utf-8")
        env = {**os.environ, "C2_URL": server.base_url, "C2_BEARER": server.bearer}
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("[end_turn]"), done.stdout
    assert len(done.stdout.strip()) > len("[end_turn]")
