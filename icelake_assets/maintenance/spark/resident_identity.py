"""The shared driver's folder: a name that tells nothing of its configuration, and private files.

A folder is named by its configuration (credentials included: a changed secret must not reuse a driver
started with the old one). A plain hash of a short secret, in a name anyone on the host can list, is
brute-forced offline; the name is an HMAC whose key is random bytes in ``<base>/.identity-key`` (0600,
made once per base folder), so it can be recomputed only by who can read that key. The folders are
0700 and the files written in them 0600: the state file holds the gateway's token, a lease or the log
may name a table or an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

KEY_FILE = ".identity-key"
_KEY_BYTES = 32


def private_folder(path: Path) -> Path:
    """``path``, created 0700 if missing; made 0700 when it is ours and looser (a folder left by an
    earlier version)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.stat()
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def private_open(path: Path, mode: str) -> IO[Any]:
    """``open(path, mode)`` (``w``, ``wb``, ``a``, ``ab``) for a file that only its owner can read."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)  # a file an earlier version left readable
    return os.fdopen(fd, mode)


def write_private(path: Path, text: str) -> None:
    with private_open(path, "w") as handle:
        handle.write(text)


def _read_key(path: Path) -> bytes:
    info = path.stat()
    if stat.S_IMODE(info.st_mode) & 0o077:
        if info.st_uid != os.getuid():
            raise PermissionError(f"{path} can be read by others: remove it (a new one is made)")
        os.chmod(path, 0o600)
    key = path.read_bytes()
    if len(key) < _KEY_BYTES:
        raise PermissionError(f"{path} is not a key ({len(key)} bytes): remove it (a new one is made)")
    return key


def host_key(base: Path) -> bytes:
    """The base folder's key, made at first use: written aside, then linked into place, so processes
    racing to make it all read the first one (a half-written key is never read)."""
    path = base / KEY_FILE
    with contextlib.suppress(FileNotFoundError):
        return _read_key(path)
    base.mkdir(parents=True, exist_ok=True, mode=0o700)  # an existing one is left as it is (shared?)
    tmp = base / f"{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    with private_open(tmp, "wb") as handle:
        handle.write(secrets.token_bytes(_KEY_BYTES))
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process made it first: its key is the one
    except OSError:  # a file system without hard links
        if not path.exists():
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return _read_key(path)


def keyed_digest(base: Path, identity: Mapping[str, Any]) -> str:
    """A folder name for ``identity`` (secrets included), keyed by :func:`host_key` of ``base``."""
    text = json.dumps(identity, sort_keys=True).encode()
    return hmac.new(host_key(base), text, hashlib.sha256).hexdigest()[:16]
