"""Runs ``dagster dev`` for ``make run`` and, on Ctrl-C / SIGTERM / SIGHUP, stops every process it started.

``dagster dev`` alone leaves processes behind: its code servers wait for the runs in flight, so they, the
runs' workers and a multiprocessing resource tracker outlive it; and from a background shell (SIGINT
ignored) it ignores SIGTERM too. This launcher starts ``dagster dev`` in a session of its own, forwards
the signal to it, SIGTERMs what it leaves behind, and after ``--grace`` seconds SIGKILLs its process group
and every process still under the launcher (a child subreaper: orphans are reparented to it, not to init).
A second signal skips the wait. The exit status is 128 + the signal number, or dagster dev's own status
when it exited by itself.

Usage: .venv/bin/python scripts/run_dagster.py [--grace SECONDS] -- <dagster dev arguments>
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

import psutil

from icelake_assets.processes import live_process

PROG = "run_dagster"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
POLL_SECONDS = 0.2
# What the processes under dagster dev are, for the messages (first match on the command line).
LABELS = (
    ("dagster dev", "dagster dev"),
    ("dagster_webserver", "dagster-webserver"),
    ("dagster._daemon", "dagster-daemon"),
    ("dagster code-server", "code server proxy"),
    ("dagster api grpc", "code server"),
    ("resource_tracker", "multiprocessing resource tracker"),
    ("spawn_main", "run/step worker"),
    ("icelake_assets.maintenance.spark.resident_driver", "shared Spark driver"),
)

_libc = ctypes.CDLL(None, use_errno=True)


def say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def prctl(option: int, value: int) -> bool:
    try:
        return _libc.prctl(option, value, 0, 0, 0) == 0
    except AttributeError:  # not Linux: the session and the process group still catch most
        return False


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    session: int
    start: float  # tells a process from a later one that reused its PID
    comm: str  # the kernel's short name: the label when the command line is gone (an exiting process)
    cmdline: str

    @property
    def label(self) -> str:
        for needle, label in LABELS:
            if needle in self.cmdline:
                return label
        words = self.cmdline.split()
        if not words:
            return self.comm
        name = os.path.basename(words[0])
        if name.startswith("python") and len(words) > 2 and words[1] == "-m":
            return words[2]  # the module or script it runs says more than "python"
        if name.startswith("python") and len(words) > 1 and not words[1].startswith("-"):
            return os.path.basename(words[1])
        return name


def read_proc(pid: int) -> Proc | None:
    """A live process (None: gone, or a zombie: it only waits to be reaped, by reap() when it is ours)."""
    proc = live_process(pid)
    try:
        if proc is None:
            return None
        with proc.oneshot():
            return Proc(
                pid, proc.ppid(), os.getsid(pid), proc.create_time(), proc.name(), " ".join(proc.cmdline())
            )
    except (psutil.Error, OSError):
        return None


def processes_under(root: int, session: int) -> dict[int, Proc]:
    """Live descendants of ``root``, plus any process still in ``session`` (dagster dev's)."""
    pids = {child.pid for child in psutil.Process(root).children(recursive=True)}
    for pid in psutil.pids():
        try:
            if os.getsid(pid) == session:
                pids.add(pid)
        except OSError:
            pass
    return {pid: proc for pid in pids - {root} if (proc := read_proc(pid)) is not None}


def send(proc: Proc, sig: int) -> None:
    """``sig`` to ``proc`` unless its PID now names another process."""
    now = read_proc(proc.pid)
    if now is None or now.start != proc.start:
        return
    try:
        os.kill(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def reap(dev: subprocess.Popen) -> None:
    """Collects exited children: dagster dev and, as a subreaper, the orphans reparented to us."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == dev.pid:
            # Set here: Popen.poll() would find it reaped already and report 0.
            dev.returncode = os.waitstatus_to_exitcode(status)


def remember(seen: dict[int, Proc], procs: dict[int, Proc]) -> None:
    """Adds ``procs`` to ``seen``, keeping the first reading of a process (its command line while alive)."""
    for pid, proc in procs.items():
        if pid not in seen or seen[pid].start != proc.start:
            seen[pid] = proc


def describe(procs: dict[int, Proc]) -> str:
    by_label: dict[str, list[int]] = defaultdict(list)
    for proc in sorted(procs.values(), key=lambda p: p.pid):
        by_label[proc.label].append(proc.pid)
    return ", ".join(
        f"{label} (pid{'s' if len(pids) > 1 else ''} {', '.join(map(str, pids))})"
        for label, pids in by_label.items()
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--grace",
        type=float,
        default=20.0,
        help="seconds to wait for everything to exit after the signal before SIGKILL (default 20)",
    )
    parser.add_argument("dev_args", nargs=argparse.REMAINDER, help="-- then the arguments of dagster dev")
    args = parser.parse_args(argv)
    if args.dev_args[:1] == ["--"]:
        args.dev_args = args.dev_args[1:]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    pending: list[int] = []
    # Handlers, not SIG_IGN: a started program gets SIG_DFL back (dagster dev maps SIGTERM onto its
    # SIGINT disposition, so an inherited SIG_IGN would make it ignore both).
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, _frame: pending.append(signum))
    # Orphans (children of a code server that exited) stay under us, where the final sweep finds them.
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    me = os.getpid()

    def die_with_launcher() -> None:
        # dagster dev still shuts down in order if the launcher itself is SIGKILLed.
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    # A session of its own: a terminal's Ctrl-C reaches only us, and we decide what it stops.
    dev = subprocess.Popen(
        [sys.executable, "-m", "dagster", "dev", *args.dev_args],
        start_new_session=True,
        preexec_fn=die_with_launcher,
    )
    say(f"dagster dev started (pid {dev.pid}); Ctrl-C or SIGTERM stops it and every process it started")

    while dev.returncode is None and not pending:
        time.sleep(POLL_SECONDS)
        reap(dev)
    seen = processes_under(me, dev.pid)
    stop = pending.pop(0) if pending else None
    if dev.returncode is None and stop is not None:
        say(
            f"{signal.Signals(stop).name} received: stopping dagster dev (pid {dev.pid}) and the "
            f"{len(seen) - 1} processes under it; SIGKILL after {args.grace:g} s"
        )
        # dagster dev treats SIGTERM as its Ctrl-C; SIGHUP would kill it without its shutdown.
        os.kill(dev.pid, signal.SIGINT if stop == signal.SIGINT else signal.SIGTERM)
    else:
        say(f"dagster dev exited with status {dev.returncode}; processes it left: {len(seen)}")

    # dagster dev stops its webserver and daemon; what it leaves (code servers waiting for runs, the runs'
    # processes) gets SIGTERM once it has exited, then SIGKILL at the deadline.
    started = time.monotonic()
    deadline = started + args.grace
    termed: set[tuple[int, int]] = set()
    left = seen
    while time.monotonic() < deadline and not pending:
        reap(dev)
        left = processes_under(me, dev.pid)
        remember(seen, left)
        if dev.returncode is not None:
            if not left:
                break
            new = {pid: p for pid, p in left.items() if (pid, p.start) not in termed}
            if new:
                say(f"dagster dev exited ({dev.returncode}); SIGTERM to what it left: {describe(new)}")
                for proc in new.values():
                    send(proc, signal.SIGTERM)
                    termed.add((proc.pid, proc.start))
        time.sleep(POLL_SECONDS)

    killed: dict[int, Proc] = {}
    if left:
        why = "second signal" if pending else f"still running after {time.monotonic() - started:.0f} s"
        say(f"{why}: SIGKILL to {describe(left)}")
    # Repeated: a process may fork while we kill its parent.
    for _ in range(50):
        reap(dev)
        left = processes_under(me, dev.pid)
        if not left:
            break
        try:
            os.killpg(dev.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for proc in left.values():
            send(proc, signal.SIGKILL)
        remember(killed, left)
        remember(seen, left)
        time.sleep(0.1)
    reap(dev)
    left = processes_under(me, dev.pid)

    if left:
        say(f"could not stop: {describe(left)}")
        return 1
    if seen:
        sigkilled = f"; SIGKILLed: {describe(killed)}" if killed else ""
        say(f"stopped {len(seen)} processes: {describe(seen)}{sigkilled}")
    if stop is not None:
        return 128 + stop
    code = dev.returncode if dev.returncode is not None else 1
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
