"""`c2 --version`, `c2 serve --help` and `c2 pair-url` as a new user meets them."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
from pathlib import Path

import pytest

from c2.api.cli import _lasting_objects, main
from c2.api.settings import Settings
from c2.core.auth import digest
from c2.core.session import utcnow
from c2.core.store.database import Store, sqlite_url
from c2.core.store.devices import DeviceRepository


def test_cli_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]):
    """`c2 --version` prints `c2 X.Y.Z` and exits 0."""
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert re.fullmatch(r"c2 \d+\.\d+\.\d+\n", capsys.readouterr().out)


def test_cli_serve_help_shows_defaults_and_environment(capsys: pytest.CaptureFixture[str]):
    """`c2 serve --help` names the default host and port and the environment variables."""
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    assert "default 127.0.0.1" in out and "default 4599" in out
    assert "C2_HOME" in out and "C2_DATABASE_URL" in out and "C2_MAX_LIVE_AGENTS" in out


def test_cli_pair_url_mints_a_fresh_token_each_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Each `c2 pair-url` prints a new one-time URL whose token is stored unredeemed."""
    urls = []
    for _ in range(2):
        assert main(["pair-url", "--home", str(tmp_path), "--port", "4700"]) == 0
        urls.append(capsys.readouterr().out.strip())
    assert all(u.startswith("http://127.0.0.1:4700/pair#token=") for u in urls)
    assert urls[0] != urls[1]
    store = Store(sqlite_url(tmp_path.resolve()))
    try:
        store.migrate()
        token = urls[1].split("#token=")[1]
        redeemed = store.write_sync(
            lambda uow: DeviceRepository(uow.conn).redeem_pairing_token(digest(token), utcnow())
        )
    finally:
        store.close()
    assert redeemed


def test_cli_serve_broken_providers_toml_is_one_line(tmp_path: Path):
    """A broken providers.toml stops `c2 serve` with one line naming file and line, exit 2."""
    (tmp_path / "providers.toml").write_text("[providers.x]\ncommand = \n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "c2.api.cli", "serve", "--home", str(tmp_path), "--port", "0"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "providers.toml" in lines[0] and "line 2" in lines[0]
    assert "Traceback" not in done.stdout + done.stderr


def test_cli_serve_refuses_a_vapid_subject_that_is_not_a_uri(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """`--vapid-subject` must be mailto: or https: (RFC 8292); anything else is one line."""
    code = main(["serve", "--home", str(tmp_path), "--port", "0", "--vapid-subject", "ops"])
    assert code == 2
    assert "--vapid-subject must be a mailto: or https: URI" in capsys.readouterr().err
    out = subprocess.run(
        [sys.executable, "-m", "c2.api.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--vapid-subject" in out and "C2_WEBHOOK_BACKOFF_SCALE" in out


def test_cli_serve_refuses_a_trusted_proxy_that_is_no_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    """A trusted proxy must be an IP address or network, from the flag or from
    `$C2_TRUSTED_PROXIES`; anything else stops `c2 serve` with one line naming it."""
    code = main(["serve", "--home", str(tmp_path), "--port", "0", "--trusted-proxy", "lb.local"])
    assert code == 2
    assert "trusted proxy 'lb.local' is not an IP address or network" in capsys.readouterr().err
    monkeypatch.setenv("C2_TRUSTED_PROXIES", "10.0.0.5, 10.1.0.0/16,")
    assert Settings.build(home=tmp_path).trusted_proxies == ("10.0.0.5/32", "10.1.0.0/16")
    monkeypatch.setenv("C2_TRUSTED_PROXIES", "10.0.0.0/33")
    assert main(["serve", "--home", str(tmp_path), "--port", "0"]) == 2
    assert "'10.0.0.0/33'" in capsys.readouterr().err
    # What the build froze is collectable again once `serve` returns (here, pytest's objects).
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("C2_EVENT_RETENTION_DAYS", "-1", "must be more than 0"),  # the sweep wiped the log
        ("C2_EVENT_RETENTION_DAYS", "0", "must be more than 0"),
        ("C2_EVENT_RETENTION_DAYS", "nan", "must be a finite number"),
        ("C2_CLUSTER_LEASE_SECONDS", "inf", "must be a finite number"),
        ("C2_MAX_LIVE_AGENTS", "abc", "must be a whole number"),
        ("C2_MAX_BODY_BYTES", "1.5", "must be a whole number"),
    ],
)
def test_cli_serve_refuses_a_number_it_cannot_use_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: str,
    said: str,
):
    """A numeric setting that is no (finite, whole) number, or a retention of no time at all,
    stops `c2 serve` with one line naming the variable, before anything is opened."""
    monkeypatch.setenv(name, value)
    assert main(["serve", "--home", str(tmp_path / "home"), "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and name in err and said in err and repr(value) in err
    assert not (tmp_path / "home").exists()


def test_numeric_settings_clamp_what_they_can() -> None:
    """Values past a setting's bounds are brought within them (as before)."""
    env = {
        "C2_MAX_LIVE_AGENTS": "0",
        "C2_CLUSTER_LEASE_SECONDS": "1e12",
        "C2_EVENT_RETENTION_DAYS": "99999999999999999999",
        "C2_COMMIT_INTERVAL_MS": "-5",
    }
    settings = Settings.build(home=Path("/tmp/c2-unused"), env=env)
    assert settings.max_live_agents == 1
    assert settings.cluster_lease_seconds == 3600.0
    assert settings.event_retention_days == 36_500.0
    assert settings.commit_interval_ms == 0.0


@pytest.mark.parametrize(
    "url",
    [
        "mysql://c2:secret@db/c2",  # a backend whose driver is not installed
        "postgresql+psycopg2://c2:secret@db/c2",
        "postgres://c2:secret@db/c2",  # no such dialect
        "not a url secret",
    ],
)
def test_cli_serve_refuses_a_database_url_it_cannot_open_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, url: str
):
    """A `$C2_DATABASE_URL` c2 cannot open stops `c2 serve` with one line that says what it
    takes, and never echoes the URL (it may hold a password)."""
    monkeypatch.setenv("C2_DATABASE_URL", url)
    assert main(["serve", "--home", str(tmp_path), "--port", "0"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("c2: cannot open the database") and len(err.splitlines()) == 1, err
    assert "postgresql+psycopg://" in err and "secret" not in err


def test_serve_makes_its_lasting_objects_with_the_collector_off_then_freezes_them():
    """What `c2 serve` makes before it runs (its modules, the app) is made with the cyclic
    collector off and then frozen out of its reach; the collector is on again afterwards,
    also when that build fails."""
    try:
        with _lasting_objects():
            assert not gc.isenabled()
            # Containers the collector tracks, made while it is off.
            made: list[list[int]] = [[] for _ in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= len(made)
        with pytest.raises(RuntimeError), _lasting_objects():
            raise RuntimeError("the build failed")
        assert gc.isenabled()
    finally:
        gc.unfreeze()  # this test's process goes on collecting as before


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--port", "70000"],
        ["serve", "--port", "-1"],
        ["serve", "--allow-host", ""],
        ["serve", "--allow-host", "a:b:c"],
        ["serve", "--allow-host", "example.com:99999"],
        ["pair", "--name", ""],
        ["pair", "--name", "x" * 129],
        ["pair-url", "--port", "99999"],
    ],
)
def test_cli_refuses_values_it_cannot_use_before_opening_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A port out of range, a Host that is none, a device name the API would refuse: one
    line and exit 2, and the home is not created (a bad port used to end in a traceback after
    the database was made; --allow-host '' after the socket was bound)."""
    home = tmp_path / "home"
    try:
        code = main([*argv, "--home", str(home)])
    except SystemExit as exit_:  # argparse's own refusal
        code = int(exit_.code or 0)
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err and "Traceback" not in err
    assert not home.exists()
