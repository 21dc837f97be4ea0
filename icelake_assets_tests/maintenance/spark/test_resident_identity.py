"""The shared driver's folder (maintenance/spark/resident_identity.py): a name keyed by a host-local
secret, so it tells nothing of the configuration's secrets, and folders and files private to the user
(issue 55). No JVM here."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from pathlib import Path

import pytest

from icelake_assets.maintenance.spark import resident_lease
from icelake_assets.maintenance.spark.resident_identity import KEY_FILE, host_key, private_open
from icelake_assets.maintenance.spark.resident_spark import code_version, driver_folder, locked
from icelake_assets.processes import host_identity

SECRET = "hunter2"  # short: a plain hash of it is brute-forced in no time
CONF = {"spark.master": "local[1]", "spark.hadoop.fs.s3a.secret.key": SECRET}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def no_umask():
    """Modes set by the code, not by a friendly umask."""
    before = os.umask(0)
    yield
    os.umask(before)


def test_same_configuration_same_folder_another_secret_another_folder(tmp_path):
    folder = driver_folder(CONF, tmp_path)
    assert folder == driver_folder(dict(reversed(CONF.items())), tmp_path)
    # A changed credential never reuses a driver started with the old one.
    assert driver_folder({**CONF, "spark.hadoop.fs.s3a.secret.key": "hunter3"}, tmp_path) != folder


def test_the_folder_name_is_no_plain_hash_of_the_configuration(tmp_path):
    name = driver_folder(CONF, tmp_path).name
    identity = {"conf": dict(sorted(CONF.items())), "code": code_version(), "host": host_identity()}
    plain = [json.dumps(identity), json.dumps(identity, sort_keys=True), json.dumps(CONF), SECRET]
    assert name not in {hashlib.sha256(p.encode()).hexdigest()[:16] for p in plain}
    # It depends on the host-local key: the same configuration under another base (key) is another
    # name, so no one without the key (0600) can test guesses of the secret against it.
    other = tmp_path / "other"
    assert driver_folder(CONF, other).name != name
    assert _mode(tmp_path / KEY_FILE) == 0o600 and len((tmp_path / KEY_FILE).read_bytes()) == 32


def test_the_key_is_made_once_when_processes_race(tmp_path):
    keys: list[bytes] = []
    threads = [threading.Thread(target=lambda: keys.append(host_key(tmp_path))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1 and sorted(p.name for p in tmp_path.iterdir()) == [KEY_FILE]


def test_a_key_others_can_read_is_made_private_or_refused(tmp_path):
    host_key(tmp_path)
    (tmp_path / KEY_FILE).chmod(0o644)
    host_key(tmp_path)
    assert _mode(tmp_path / KEY_FILE) == 0o600


def test_folders_are_0700_and_files_0600(tmp_path, no_umask, monkeypatch):
    base = tmp_path / "spark"
    folder = driver_folder(CONF, base)
    folder.mkdir(parents=True, mode=0o755)  # left by an earlier version
    (folder / "lock").write_text("")
    with locked(folder):
        pass
    assert _mode(base) == 0o700 and _mode(folder) == 0o700
    assert _mode(folder / "lock") == 0o600 and _mode(base / KEY_FILE) == 0o600
    (folder / "leases").mkdir(mode=0o700)
    monkeypatch.setattr(resident_lease, "_LEASE", folder / "leases" / "1")
    monkeypatch.setattr(resident_lease, "_HEAD", "group 1")
    resident_lease._write_lease()
    assert _mode(folder / "leases" / "1") == 0o600
    with private_open(folder / "driver.log", "ab") as log:  # as the driver's log is opened
        log.write(b"x")
    assert _mode(folder / "driver.log") == 0o600
