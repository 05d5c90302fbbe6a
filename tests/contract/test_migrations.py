"""Schema migrations at start: members migrating one database at once, and a database at a
revision this c2 does not know."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from c2.api.cli import main
from c2.core.store.database import HEAD_REVISION, Store
from tests.contract.pg import PG_URL, pg_schema_url

REPO = Path(__file__).resolve().parents[2]


MIGRATE = "import sys; from c2.core.store.database import Store; Store(sys.argv[1]).migrate()"


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="C2_TEST_DATABASE_URL is not set")
def test_members_starting_together_migrate_a_new_database_once() -> None:
    """Three processes migrating one new PostgreSQL schema at the same moment all succeed
    (they take turns); without turns, all but one failed on a type or table another had just
    made (UniqueViolation)."""
    with pg_schema_url("migrate") as url:
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", MIGRATE, url],
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        errors = [run.communicate(timeout=120)[1] for run in runs]
        assert [run.returncode for run in runs] == [0, 0, 0], errors
        store = Store(url)
        try:
            with store._writer_engine.connect() as conn:
                version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        finally:
            store.close()
        assert version == HEAD_REVISION


def test_a_database_at_an_unknown_revision_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A home whose database a newer (or renamed) migration made stops `c2 pair` and
    `c2 serve` with one line naming the revision, not Alembic's traceback."""
    home = tmp_path / "home"
    assert main(["pair", "--name", "first", "--home", str(home)]) == 0
    capsys.readouterr()
    with sqlite3.connect(home / "c2.db") as db:
        db.execute("UPDATE alembic_version SET version_num = '0099_future'")
    for argv in (["pair", "--name", "again"], ["serve", "--port", "0"]):
        assert main([*argv, "--home", str(home)]) != 0
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "'0099_future'" in err and "does not know" in err, err
