"""A real PostgreSQL 16 with pgvector for the tests: the `pgserver` wheel's server, started
in a temporary folder and reached on a Unix socket there (no TCP port, no network, no
install). One server per test session (it takes a few seconds to start); a fresh database
per test (CREATE DATABASE takes milliseconds). The fault tests start servers of their own to
kill.

Nothing here skips: pgserver and psycopg are in the test extra, and a suite that could not
reach PostgreSQL must fail, not pass on SQLite alone."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

_numbers = itertools.count(1)


class PgTestServer:
    """One running server (pgserver's), its databases, and ways to kill and restart it."""

    def __init__(self) -> None:
        import pgserver

        # Its own folder, not pytest's: run as root, pgserver runs the server as another user,
        # which must reach the folder (pytest's are 0700). Short: a Unix socket's path must
        # fit in 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="mem-pg-"))
        self.root.chmod(0o755)
        # This process adopts the server while it starts (pg_ctl's postmaster is orphaned at
        # once): killed, it is then reaped here. Adopted by init instead, whose reaping here
        # is slow, its zombie kept the pid in postmaster.pid alive and no restart would start.
        _child_subreaper(True)
        try:
            self.server = pgserver.get_server(self.root / "data", cleanup_mode="stop")
        finally:
            _child_subreaper(False)
        info = self.server.get_postmaster_info()
        self.socket_dir = str(info.socket_dir)

    def url(self, database: str = "postgres", user: str = "postgres", password: str = "") -> str:
        auth = quote(user) + (f":{quote(password)}" if password else "")
        return f"postgresql://{auth}@/{database}?host={quote(self.socket_dir)}"

    def admin(self):  # noqa: ANN201 - a psycopg connection
        import psycopg

        return psycopg.connect(self.url(), autocommit=True)

    def create_database(self, name: str | None = None) -> str:
        name = name or f"mem_test_{os.getpid()}_{next(_numbers)}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def pid(self) -> int | None:
        pid_file = Path(self.server.pgdata) / "postmaster.pid"
        try:
            return int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill(self) -> None:
        """SIGKILL the postmaster and every process it started: the server dies as in a power
        cut (its clients' connections drop mid-statement)."""
        import psutil

        pid = self.pid()
        if pid is None:
            return
        try:
            main = psutil.Process(pid)
            procs = [main, *main.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for proc in procs:
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        try:
            os.waitpid(pid, 0)  # adopted (see __init__): reaped here
        except ChildProcessError:
            psutil.wait_procs([main], timeout=10)

    def restart(self) -> None:
        """Start the server again on the same data (crash recovery replays its log)."""
        deadline = time.monotonic() + 30
        while True:
            try:
                self.server.ensure_postgres_running()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self) -> None:
        try:
            self.server.cleanup()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _child_subreaper(on: bool) -> None:
    """prctl(PR_SET_CHILD_SUBREAPER): orphans of this process's children become its own."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1 if on else 0, 0, 0, 0)
