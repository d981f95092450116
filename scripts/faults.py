"""The fault suite (issue 30): no acknowledged write is ever lost.

    python scripts/faults.py [--runs 240] [--seed 1] [--quick] [--only KIND ...] [--keep DIR]

Each run copies a prepared store, injects one fault into real `mem` processes, then counts:
every write a command acknowledged (exit 0 and its output says it stored, corrected, forgot,
imported or re-embedded; an MCP retain that answered without an error; a row a foreign
SQLite client committed) must be in the store, and nothing unacknowledged may be half there
(a document is its old or its new version whole, a killed import left no bank or the whole
bank, a killed batch kept whole batches of 64, a correction closed its fact only together
with the new fact). Then `PRAGMA integrity_check` must say ok, `mem doctor` must pass and a
new retain must be stored. A traceback in any process's stderr counts, as does an error
message mem did not anticipate ("unexpected ...").

Fault kinds, chosen in turn (--only picks some):
  kill9:CMD, sigint:CMD  kill -9 or Ctrl-C at a random moment of CMD: retain-text,
                         retain-jsonl, retain-document, correct, forget, import, reembed,
                         banks-delete, mcp-retain (the server, driven through the MCP
                         client SDK)
  concurrent             CLI writers, two MCP servers, Python sqlite3 and sqlite3-shell
                         clients writing their own table and reading, and racing document
                         replaces, corrections, imports or a reembed, all at once
  full-disk              writes (and a live MCP server's retains) until a small tmpfs is
                         full (RLIMIT_FSIZE when not root), reads on the full disk, then
                         room again: the server and the CLI store again
  read-only              the store on a read-only mount or an unwritable folder: reads work,
                         writes are refused in one line, no byte changes

Prints one table (stdout), per kind and in all: runs, faults injected (signals that reached
a running process, writes refused by a full disk or read-only media, foreign clients'
operations beside mem's), acknowledged writes, lost, half-written, tracebacks, start_up
(a Ctrl-C that came while Python itself was starting, before mem's first line ran: Python
prints that traceback, and no handler of mem's can exist yet; counted apart), unexpected
errors ("mem: error: unexpected ...") and failed checks. Progress on stderr. Exit status 1
when anything was lost, half-written, a traceback, an unexpected error or a failed check.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

COMMANDS = [
    "retain-text",
    "retain-jsonl",
    "retain-document",
    "correct",
    "forget",
    "import",
    "reembed",
    "banks-delete",
    "mcp-retain",
]
KINDS = [
    *(f"{how}:{cmd}" for cmd in COMMANDS for how in ("kill9", "sigint")),
    "concurrent",
    "full-disk",
    "read-only",
]

# A store's own files: a copy of a store is these (those that exist), copied while nothing
# has it open.
STORE_FILES = ("mem.db", "mem.db-wal", "mem.db-shm")

# -- machines: mounts, read-only media, full disks -------------------------------------------


class Unavailable(Exception):
    """A fault this machine cannot make (a mount without root)."""


def is_root() -> bool:
    return os.geteuid() == 0


@contextmanager
def tmpfs(size_bytes: int, parent: Path | None = None) -> Iterator[Path]:
    """A fresh tmpfs of this size (root only), unmounted and removed afterwards."""
    if not is_root():
        raise Unavailable("mounting a tmpfs needs root")
    mountpoint = Path(tempfile.mkdtemp(prefix="mem-faults-tmpfs-", dir=parent))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        mountpoint.rmdir()
        raise Unavailable(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)
        try:
            mountpoint.rmdir()
        except OSError:
            pass


def _chattr(flag: str, *paths: Path) -> bool:
    done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True)
    return done.returncode == 0


@contextmanager
def read_only_media(folder: Path, how: str) -> Iterator[Path]:
    """The store folder/mem.db where nothing can be written; yields the store's path there.

    how "mount": a copy of the folder's files on a tmpfs remounted read-only (root only);
    "folder": the folder and its files themselves made unwritable: the immutable attribute
    for root (whom mode bits do not stop), mode bits (0555, 0444) for anyone else."""
    if how == "mount":
        with tmpfs(64 << 20) as mountpoint:
            for entry in folder.iterdir():
                shutil.copy2(entry, mountpoint / entry.name)
            done = subprocess.run(
                ["mount", "-o", "remount,ro", str(mountpoint)], capture_output=True, text=True
            )
            if done.returncode != 0:
                raise Unavailable(f"cannot remount read-only: {done.stderr.strip()}")
            yield mountpoint / "mem.db"
        return
    if how != "folder":
        raise ValueError(how)
    files = sorted(folder.iterdir())
    if is_root():
        if not _chattr("+i", folder, *files):
            _chattr("-i", folder, *files)
            raise Unavailable("chattr +i is not supported here")
        try:
            yield folder / "mem.db"
        finally:
            _chattr("-i", folder, *files)
        return
    modes = {p: p.stat().st_mode & 0o7777 for p in [folder, *files]}
    for p in files:
        p.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield folder / "mem.db"
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


# A process whose files may grow by no more than RLIMIT_FSIZE bytes: the full disk of a
# machine where a tmpfs cannot be mounted (not root). SQLite's writes past it fail with
# EFBIG, as on a full disk with ENOSPC (Python ignores the SIGXFSZ that comes with them).
FSIZE_PREFIX = (
    "import resource, sys; limit = int(sys.argv.pop(1)); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
    "sys.argv[0] = 'mem'; from memcli.cli import main; main()"
)


def mem_argv(db: Path, *args: str, fsize: int | None = None) -> list[str]:
    """The command line of `mem --db DB ARGS`: the console script users run, where it is
    installed beside this Python (its files bounded to fsize bytes if given)."""
    if fsize is not None:
        return [sys.executable, "-c", FSIZE_PREFIX, str(fsize), "--db", str(db), *args]
    script = Path(sys.executable).with_name("mem")
    mem = [str(script)] if script.exists() else [sys.executable, "-m", "memcli"]
    return [*mem, "--db", str(db), *args]


# A frame of mem's own code in a traceback (not the editable install's finder that site
# runs while Python starts).
MEM_FRAME = re.compile(r'File "[^"]*/memcli/[^"]*\.py"')


def python_start_up(err: str) -> bool:
    """Whether a traceback is Python's own start-up interrupted (site, .pth files, the
    console script's imports), before any of mem's code ran, where no handler of mem's can
    be: what a Ctrl-C in a command's first few tens of milliseconds prints."""
    return (
        "Traceback" in err
        and err.rstrip().endswith("KeyboardInterrupt")
        and not (MEM_FRAME.search(err))
    )


def fill(folder: Path) -> None:
    """Take every free byte of the file system holding folder (a file named .filler)."""
    fd = os.open(folder / ".filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 65536, 4096, 512, 1):
            block = b"\0" * size
            try:
                while os.write(fd, block) == size:
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)


# -- what the runs write ---------------------------------------------------------------------

WORDS = (
    "garden kitchen river mountain letter train coffee window bicycle piano market harbor "
    "lantern orchard violin ferry bakery museum glacier meadow canyon library tram teapot "
    "notebook umbrella chimney village workshop lighthouse vineyard airport bridge tunnel "
    "festival concert exam passport invoice recipe sofa balcony jacket scarf camera ladder"
).split()
NAMES = ["Maya", "Priya", "Tom", "Ines", "Carlos", "Yuki", "Omar", "Lena", "Sven", "Aiko"]
VERBS = ["left", "found", "painted", "fixed", "sold", "borrowed", "photographed", "cleaned"]


def sentence(rng: random.Random, tag: str) -> str:
    """A short, one-fact sentence that carries a unique tag (for finding it again)."""
    w = rng.sample(WORDS, 3)
    return (
        f"{rng.choice(NAMES)} {rng.choice(VERBS)} the {w[0]} near the {w[1]} "
        f"after the {w[2]} ({tag})."
    )


def jsonl_rows(rng: random.Random, prefix: str, n: int, **extra: object) -> list[dict]:
    rows = []
    for i in range(n):
        day = 1 + rng.randrange(28)
        rows.append(
            {
                "id": f"{prefix}{i}",
                "text": sentence(rng, f"{prefix}{i}"),
                "timestamp": f"2025-{1 + rng.randrange(12):02d}-{day:02d}T10:00:00Z",
                **extra,
            }
        )
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# -- reading a store back (after every process has ended) ------------------------------------


def query(db: Path, sql: str, *params: object) -> list[tuple]:
    """Rows of sql on the store, read with apsw and sqlite-vec (whose vec0 tables Python's
    sqlite3 cannot load everywhere), after every process has ended."""
    import apsw
    import sqlite_vec

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.set_busy_timeout(30000)
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def bank_id(db: Path, bank: str) -> int | None:
    rows = query(db, "SELECT id FROM banks WHERE name = ? AND kind = 'user'", bank)
    return rows[0][0] if rows else None


def source_ids(db: Path, bank: str = "default", like: str = "%") -> list[str]:
    return [
        r[0]
        for r in query(
            db,
            "SELECT f.source_id FROM facts f JOIN banks b ON b.id = f.bank_id "
            "WHERE b.name = ? AND b.kind = 'user' AND f.source_id LIKE ?",
            bank,
            like,
        )
    ]


def texts_like(db: Path, pattern: str, bank: str = "default") -> list[str]:
    return [
        r[0]
        for r in query(
            db,
            "SELECT f.text FROM facts f JOIN banks b ON b.id = f.bank_id "
            "WHERE b.name = ? AND b.kind = 'user' AND f.text LIKE ?",
            bank,
            pattern,
        )
    ]


def document_sources(db: Path, external_id: str, bank: str = "default") -> list[str]:
    return sorted(
        r[0] or ""
        for r in query(
            db,
            "SELECT f.source_id FROM facts f JOIN documents d ON d.id = f.document_id "
            "JOIN banks b ON b.id = d.bank_id "
            "WHERE b.name = ? AND b.kind = 'user' AND d.external_id = ?",
            bank,
            external_id,
        )
    )


def fact_count(db: Path, bank: str) -> int:
    b = bank_id(db, bank)
    if b is None:
        return 0
    return query(db, "SELECT count(*) FROM facts WHERE bank_id = ?", b)[0][0]


def integrity(db: Path) -> str:
    try:
        rows = query(db, "PRAGMA integrity_check")
    except Exception as exc:  # noqa: BLE001 - any failure to check is the finding
        return f"integrity_check could not run: {exc}"
    return "ok" if rows == [("ok",)] else "; ".join(r[0] for r in rows[:3])


def vectors_off_model(db: Path, bank: str) -> tuple[str, list[int]]:
    """(the bank's model, the facts whose vector is not that model's embedding of the fact):
    a fact written with another model's vector (a retain racing a reembed's swap) cannot be
    found by meaning, which is as good as lost. Each fact is embedded again, as reembed
    would (lifecycle.embedding_text), and compared with the stored vector."""
    import numpy as np

    from memcli.lifecycle import embedding_text
    from memcli.models import choice
    from memcli.models.load import load_embedder
    from memcli.store import Store

    with Store(db, create=False, readonly=True) as store:
        b = store.banks.bank_id(bank)
        name, fingerprint = store.vectors.bank_embedder(b)
        rows = store.reembed.embedding_inputs(b, -1, 1 << 30)
        stored = store.vectors.vectors_for([r[0] for r in rows], b)
    model = load_embedder(choice.for_bank(name, None, bank=bank).spec)
    if fingerprint and getattr(model, "fingerprint", fingerprint) != fingerprint:
        return f"{name} (another file than the bank's)", [r[0] for r in rows]
    expected = model.embed([embedding_text(*r[1:]) for r in rows]) if rows else []
    bad = []
    for r, e in zip(rows, expected):
        v = stored.get(r[0])
        if v is None or float(np.dot(e, v)) / float(np.linalg.norm(e) * np.linalg.norm(v)) < 0.9:
            bad.append(r[0])
    return name or "none", bad


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.iterdir()):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


# -- one run ---------------------------------------------------------------------------------


@dataclass
class Tally:
    runs: int = 0
    faults: int = 0
    acked: int = 0
    lost: int = 0
    half: int = 0
    tracebacks: int = 0
    start_up: int = 0  # Ctrl-C tracebacks of Python's own start-up (python_start_up)
    unexpected: int = 0
    failed: int = 0
    notes: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for name in (
            "runs",
            "faults",
            "acked",
            "lost",
            "half",
            "tracebacks",
            "start_up",
            "unexpected",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failed += other.failed
        self.notes += other.notes

    @property
    def bad(self) -> bool:
        return bool(self.lost or self.half or self.tracebacks or self.unexpected or self.failed)


@dataclass
class Done:
    """A finished process: its exit status (negative: the signal that ended it) and output."""

    argv: list[str]
    code: int
    out: str
    err: str
    signalled: bool = False  # our signal reached it while it ran
    seconds: float = 0.0

    def said(self, pattern: str) -> re.Match | None:
        return re.search(pattern, self.err)


class Run:
    """One run: a folder holding a copy of the prepared store, every stderr seen, the tally."""

    def __init__(self, suite: Suite, kind: str, number: int) -> None:
        self.suite = suite
        self.kind = kind
        self.number = number
        self.rng = random.Random(f"{suite.seed}-{number}-{kind}")
        self.dir = suite.work / f"run{number:04d}"
        self.dir.mkdir()
        self.db = self.dir / "mem.db"
        self.tally = Tally(runs=1)
        self.stderrs: list[tuple[str, str]] = []

    # -- bookkeeping

    def note(self, what: str) -> None:
        self.tally.notes.append(f"run {self.number} {self.kind}: {what}")

    def lost(self, n: int, what: str) -> None:
        if n:
            self.tally.lost += n
            self.note(f"LOST {n}: {what}")

    def half(self, what: str) -> None:
        self.tally.half += 1
        self.note(f"HALF-WRITTEN: {what}")

    def failed(self, what: str) -> None:
        self.tally.failed += 1
        self.note(f"FAILED CHECK: {what}")

    def seen(self, name: str, err: str, interrupted: bool = False) -> None:
        """A process's stderr; interrupted: it got our Ctrl-C."""
        self.stderrs.append((name, err, interrupted))

    def copy_store(self, into: Path | None = None) -> Path:
        target = into or self.dir
        for name in STORE_FILES:
            source = self.suite.base / name
            if source.exists():
                shutil.copy2(source, target / name)
        return target / "mem.db"

    # -- processes

    def mem(self, *args: str, db: Path | None = None, fsize: int | None = None, **kw) -> Done:
        return self.run(mem_argv(db or self.db, *args, fsize=fsize), **kw)

    def run(
        self,
        argv: list[str],
        *,
        signal_at: float | Callable[[], bool] | None = None,
        sig: int = signal.SIGKILL,
        input: str | None = None,
        timeout: float = 600,
    ) -> Done:
        """Run argv; with signal_at, send sig that many seconds after it started, or as soon
        as signal_at() says so (polled every 20 ms), if it still runs."""
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.suite.env,
        )
        signalled = False
        started = time.monotonic()
        if signal_at is not None:
            timer_done = threading.Event()

            def fire() -> None:
                nonlocal signalled
                if callable(signal_at):
                    while not signal_at():
                        if timer_done.wait(0.02):
                            return
                elif timer_done.wait(signal_at):
                    return
                if proc.poll() is None:
                    signalled = True
                    proc.send_signal(sig)

            timer = threading.Thread(target=fire, daemon=True)
            timer.start()
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            self.failed(f"{' '.join(argv[3:8])} did not end within {timeout:.0f} s")
        if signal_at is not None:
            timer_done.set()
            timer.join()
        done = Done(argv, proc.returncode, out, err, signalled, time.monotonic() - started)
        self.last_seconds = done.seconds
        words = argv[argv.index("--db") + 2 :] if "--db" in argv else argv[:1]
        self.seen(" ".join(words[:3]), err, interrupted=signalled and sig == signal.SIGINT)
        if signalled:
            self.tally.faults += 1
        return done

    # -- the checks every run ends with

    def follow_up(self, db: Path) -> None:
        """The next retain after the fault is stored (the store still takes writes)."""
        text = sentence(self.rng, f"follow-up {self.number}")
        done = self.mem("retain", text, db=db)
        if done.code == 0 and done.said(r"1 facts? stored"):
            self.tally.acked += 1
            if not texts_like(db, f"%(follow-up {self.number})%"):
                self.lost(1, "the follow-up retain")
        else:
            self.failed(f"a retain after the fault: exit {done.code}: {done.err.strip()}")

    def finish(self, db: Path | None = None, follow_up: bool = True) -> Tally:
        db = db or self.db
        if not db.exists() and follow_up:  # a fault before the store was made: make it
            self.follow_up(db)
            follow_up = False
        if db.exists():
            result = integrity(db)
            if result != "ok":
                self.failed(f"integrity_check: {result}")
            doctor = self.mem("doctor", db=db)
            if doctor.code != 0:
                bad = [line for line in doctor.out.splitlines() if line.startswith("FAIL")]
                self.failed(f"mem doctor exit {doctor.code}: {bad or doctor.err.strip()}")
            if follow_up:
                self.follow_up(db)
        for name, err, interrupted in self.stderrs:
            if interrupted and python_start_up(err):
                self.tally.start_up += 1
                self.note(f"PYTHON START-UP interrupted in {name} (no frame of mem's)")
            elif "Traceback" in err:
                self.tally.tracebacks += 1
                self.note(f"TRACEBACK in {name}: {err.strip().splitlines()[-1]}")
            elif re.search(r"mem: error: unexpected|database error:", err):
                self.tally.unexpected += 1
                self.note(f"UNEXPECTED ERROR in {name}: {err.strip().splitlines()[-1]}")
        return self.tally


def one_line_error(run: Run, done: Done, *needles: str) -> bool:
    """Whether a refused command said so in one line (and which of needles it named)."""
    lines = [line for line in done.err.strip().splitlines() if line.strip()]
    ok = done.code not in (0, None) and len(lines) == 1 and lines[0].startswith("mem: error: ")
    ok = ok and (not needles or any(n in lines[0] for n in needles))
    if not ok:
        run.failed(
            f"expected a one-line error ({'/'.join(needles)}), got exit {done.code}: "
            f"{done.err.strip()[-300:]}"
        )
    return ok


# -- the MCP client --------------------------------------------------------------------------


class McpSession:
    """`mem mcp` driven through the mcp SDK's stdio Client, its pid and stderr kept (a shell
    writes its pid and becomes the server with exec)."""

    def __init__(self, run: Run, db: Path, env: dict[str, str] | None = None) -> None:
        self.run = run
        self.db = db
        n = len(run.stderrs)
        self.pidfile = run.dir / f"mcp{n}.pid"
        self.errfile = run.dir / f"mcp{n}.err"
        self.env = {**run.suite.env, **(env or {}), "MEM_FAULTS_ERR": str(self.errfile)}

    def params(self):
        from mcp.client.stdio import StdioServerParameters

        return StdioServerParameters(
            command="/bin/sh",
            args=[
                "-c",
                'echo $$ > "$0"; exec "$@" 2>>"$MEM_FAULTS_ERR"',
                str(self.pidfile),
                *mem_argv(self.db, "mcp"),
            ],
            env=self.env,
        )

    def pid(self) -> int | None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                return int(self.pidfile.read_text())
            except (OSError, ValueError):
                time.sleep(0.02)
        return None

    def collect(self, interrupted: bool = False) -> str:
        err = self.errfile.read_text() if self.errfile.exists() else ""
        self.run.seen("mem mcp", err, interrupted)
        return err


def mcp_retains(
    run: Run,
    db: Path,
    texts: list[str],
    *,
    kill_at: float | None = None,
    kill_after: int | None = None,
    sig: int = signal.SIGKILL,
    recall_every: int = 0,
) -> tuple[list[str], list[str]]:
    """Retain texts one call at a time through the real MCP client; the server gets sig
    kill_at seconds after the session began, or once kill_after retains were answered (the
    next one then on its way). (acknowledged, refused)."""
    from mcp import Client

    session = McpSession(run, db)
    acked: list[str] = []
    refused: list[str] = []
    fired: list[int] = []

    async def drive() -> None:
        async with Client(session.params(), read_timeout_seconds=120) as client:
            for i, text in enumerate(texts):
                got = await client.call_tool("retain", {"text": text})
                if got.is_error:
                    refused.append(" ".join(c.text for c in got.content if hasattr(c, "text")))
                else:
                    acked.append(text)
                if recall_every and i % recall_every == 0:
                    await client.call_tool("recall", {"query": text[:40]})

    async def killer(started: float) -> None:
        if kill_after is not None:
            while len(acked) < kill_after:
                await asyncio.sleep(0.005)
        else:
            await asyncio.sleep(max(0.0, started + kill_at - time.monotonic()))
        pid = session.pid()
        if pid is not None:
            try:
                os.kill(pid, sig)
                run.tally.faults += 1
                fired.append(sig)
            except ProcessLookupError:
                pass

    async def main() -> None:
        started = time.monotonic()
        task = asyncio.create_task(drive())
        killing = kill_at is not None or kill_after is not None
        kill = asyncio.create_task(killer(started)) if killing else None
        try:
            await asyncio.wait_for(task, timeout=300)
        except Exception as exc:  # noqa: BLE001 - a killed server ends the session
            if not killing:
                run.failed(f"MCP session failed: {type(exc).__name__}: {exc}")
        finally:
            if kill is not None:
                kill.cancel()

    asyncio.run(main())
    err = session.collect(interrupted=signal.SIGINT in fired)
    if err.strip():
        run.note(f"mcp stderr: {err.strip().splitlines()[-1]}")
    return acked, refused


class LiveMcp:
    """One `mem mcp` session kept open across the steps of a run: its client runs in a
    thread of its own, one coroutine from start to end (the SDK's task groups must be left
    in the task that entered them), taking calls from a queue."""

    def __init__(self, run: Run, db: Path) -> None:
        import concurrent.futures

        self.session = McpSession(run, db)
        self.loop = asyncio.new_event_loop()
        self.calls: asyncio.Queue | None = None
        ready: concurrent.futures.Future = concurrent.futures.Future()
        self.thread = threading.Thread(
            target=lambda: self.loop.run_until_complete(self._serve(ready)), daemon=True
        )
        self.thread.start()
        ready.result(timeout=120)

    async def _serve(self, ready) -> None:
        from mcp import Client

        self.calls = asyncio.Queue()
        try:
            async with Client(self.session.params(), read_timeout_seconds=120) as client:
                ready.set_result(True)
                while (call := await self.calls.get()) is not None:
                    args, future = call
                    try:
                        future.set_result(await client.call_tool("retain", args))
                    except Exception as exc:  # noqa: BLE001 - handed to the caller
                        future.set_exception(exc)
        except Exception as exc:  # noqa: BLE001 - a server that would not start
            if not ready.done():
                ready.set_exception(exc)

    def retain(self, text: str) -> tuple[bool, str]:
        """(answered ok, the error's text)."""
        import concurrent.futures

        future: concurrent.futures.Future = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(self.calls.put_nowait, ({"text": text}, future))
        got = future.result(timeout=300)
        message = " ".join(getattr(c, "text", "") for c in got.content) if got.is_error else ""
        return not got.is_error, message

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.calls.put_nowait, None)
        self.thread.join(timeout=120)
        self.session.collect()


# -- the prepared store ----------------------------------------------------------------------


@dataclass
class Sizes:
    seed: int = 60  # facts in the store before each run (the first `doomed` are forgotten)
    doomed: int = 30
    document: int = 40  # lines of document doc-main
    new_document: int = 60  # lines of its new version
    batch: int = 250  # items of a retain --jsonl (four commits of 64)
    imported: int = 200  # facts of the export file an import reads
    reembedded: int = 100  # facts of bank rb, re-embedded with e5
    mcp_texts: int = 30

    @classmethod
    def tiny(cls) -> Sizes:
        """For the tests: what a fault needs to be seen, prepared in seconds."""
        return cls(
            seed=8,
            doomed=4,
            document=6,
            new_document=8,
            batch=2000,
            imported=40,
            reembedded=12,
            mcp_texts=20,
        )

    @classmethod
    def quick(cls) -> Sizes:
        return cls(
            seed=20,
            doomed=8,
            document=12,
            new_document=16,
            batch=150,
            imported=80,
            reembedded=40,
            mcp_texts=15,
        )


class Suite:
    def __init__(self, work: Path, seed: int, sizes: Sizes, keep: Path | None = None) -> None:
        self.work = work
        self.seed = seed
        self.sizes = sizes
        self.keep = keep
        self.base = work / "base"
        self.env = {**os.environ, "MEM_BANK": "default"}
        self.env.pop("MEM_DB", None)
        self.durations: dict[str, float] = {}
        self.correct_id = 0
        self.number = 0

    # -- preparing

    def prepare(self, calibrate: bool = True) -> None:
        """The store every run starts from (bank default: seed facts, `doomed` of them
        tagged, document doc-main; bank rb for reembed) and the export file import reads;
        then each command once without a fault, which times it and checks the checks."""
        rng = random.Random(self.seed)
        s = self.sizes
        self.base.mkdir()
        db = self.base / "mem.db"
        files = self.work / "files"
        files.mkdir()
        seed_rows = jsonl_rows(rng, "s", s.seed)
        for row in seed_rows[: s.doomed]:
            row["tags"] = ["doomed"]
        steps = [
            ["retain", "--jsonl", str(write_jsonl(files / "seed.jsonl", seed_rows))],
            [
                "retain",
                "--jsonl",
                str(
                    write_jsonl(
                        files / "doc0.jsonl",
                        jsonl_rows(rng, "d0-", s.document, document_id="doc-main"),
                    )
                ),
            ],
            [
                "--bank",
                "rb",
                "retain",
                "--jsonl",
                str(write_jsonl(files / "rb.jsonl", jsonl_rows(rng, "rb", s.reembedded))),
            ],
        ]
        for args in steps:
            self._must(mem_argv(db, *args))
        source = self.work / "source" / "mem.db"
        source.parent.mkdir()
        rows = jsonl_rows(rng, "x", s.imported)
        self._must(
            mem_argv(
                source,
                "--bank",
                "src",
                "retain",
                "--jsonl",
                str(write_jsonl(files / "src.jsonl", rows)),
            )
        )
        self.export_plain = files / "export.jsonl"
        self.export_vectors = files / "export-vectors.jsonl"
        self._must(mem_argv(source, "--bank", "src", "export", "-o", str(self.export_plain)))
        self._must(
            mem_argv(
                source, "--bank", "src", "export", "--with-vectors", "-o", str(self.export_vectors)
            )
        )
        self.correct_id = query(db, "SELECT id FROM facts WHERE source_id = ?", f"s{s.seed - 1}")[
            0
        ][0]
        self.document_v0 = document_sources(db, "doc-main")
        assert not Path(f"{db}-wal").exists(), "the prepared store was not closed cleanly"
        if calibrate:
            variants: dict[str, list[dict]] = {
                "retain-text": [{"new_store": False}],
                "retain-document": [{"variant": "jsonl"}, {"variant": "file"}],
                "import": [{"vectors": True, "into_new": False}, {"vectors": False}],
            }
            for cmd in COMMANDS:
                for options in variants.get(cmd, [{}]):
                    tally = self.one(f"clean:{cmd}", **options)
                    if tally.bad or tally.failed:
                        raise SystemExit(f"a run without a fault failed its checks: {tally.notes}")
            times = ", ".join(f"{k} {v:.1f} s" for k, v in self.durations.items())
            progress(f"calibrated: {times}")

    def _must(self, argv: list[str]) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env)
        if done.returncode != 0:
            raise SystemExit(f"preparing failed: {' '.join(argv)}: {done.stderr}")

    # -- running

    def one(self, kind: str, **options: object) -> Tally:
        self.number += 1
        run = Run(self, kind, self.number)
        run.copy_store()
        try:
            how, _, cmd = kind.partition(":")
            if how in ("kill9", "sigint", "clean"):
                fault = {"kill9": signal.SIGKILL, "sigint": signal.SIGINT}.get(how)
                tally = command_run(run, cmd, fault, **options)
            elif kind == "concurrent":
                tally = concurrent_run(run)
            elif kind == "full-disk":
                tally = full_disk_run(run)
            elif kind == "read-only":
                tally = read_only_run(run)
            else:
                raise ValueError(kind)
        except Unavailable as exc:
            run.note(f"skipped: {exc}")
            tally = run.tally
            tally.runs = 0
        if tally.bad and self.keep is not None:
            shutil.copytree(run.dir, self.keep / run.dir.name, dirs_exist_ok=True)
        shutil.rmtree(run.dir, ignore_errors=True)
        return tally

    def kill_time(self, run: Run, cmd: str) -> float:
        return run.rng.uniform(0.05, 1.05 * self.durations.get(cmd, 3.0))


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- kill -9 and Ctrl-C at a random moment of each writing command ----------------------------


def command_run(
    run: Run,
    cmd: str,
    sig: int | None,
    at: float | Callable[[], bool] | None = None,
    **options: object,
) -> Tally:
    """cmd once, with sig sent at `at` seconds or when at() says so (a random moment when
    None), then the exact count. options (else random): import's into_new and vectors, a
    document's variant ("jsonl", "file") and lines."""
    final = run.db
    suite = run.suite
    s = suite.sizes
    when: float | Callable[[], bool] | None = None
    timed = cmd  # which calibrated duration the kill moment is drawn from

    def fault(key: str) -> dict:
        """The signal arguments of the command (a variant of cmd named by key)."""
        nonlocal when, timed
        timed = key
        if sig is None:
            return {}
        when = at if at is not None else suite.kill_time(run, key)
        return {"signal_at": when, "sig": sig}

    db = run.db
    if cmd == "retain-text":
        tag = f"t{run.number}"
        text = sentence(run.rng, tag)
        if options.get("new_store", run.rng.random() < 0.3):
            # The first retain, which builds the store beside its path and links it there.
            final = db = run.dir / "new" / "mem.db"
            db.parent.mkdir()
        done = run.mem("retain", text, db=db, **fault(cmd))
        present = len(texts_like(db, f"%({tag})%")) if db.exists() else 0
        if acknowledged(done, r"1 facts? stored"):
            run.tally.acked += 1
            run.lost(1 - present, "a text retain that said stored")
        elif present > 1:
            run.half(f"{present} facts of one text")
        if sig is None and present != 1:
            run.failed("the clean text retain stored nothing")
    elif cmd == "retain-jsonl":
        n = s.batch
        prefix = f"b{run.number}-"
        rows = jsonl_rows(run.rng, prefix, n)
        path = write_jsonl(run.dir / "batch.jsonl", rows)
        done = run.mem("retain", "--jsonl", str(path), **fault(cmd))
        kept = set(source_ids(db, like=f"{prefix}%"))
        order = [r["id"] for r in rows]
        m = len(kept)
        if acknowledged(done, rf"{n} items, {n} facts stored"):
            run.tally.acked += n
            run.lost(n - m, f"of a {n}-item batch that said stored")
        else:
            said = done.said(r"kept (\d+) items?, (\d+) facts? stored")
            if said:  # Ctrl-C: the committed batches are reported and are acknowledged
                k = int(said.group(2))
                run.tally.acked += k
                run.lost(max(0, k - m), f"of {k} items an interrupted batch said it kept")
                if m != k:
                    run.half(f"an interrupted batch said it kept {k} items, the store has {m}")
            if kept != set(order[:m]) or (m % 64 and m != n):
                run.half(f"a killed batch kept {m} items, not whole batches of 64 in order")
    elif cmd == "retain-document":
        variant = options.get("variant") or run.rng.choice(["jsonl", "file"])
        lines = options.get("lines") or s.new_document
        old = sorted(document_sources(db, "doc-main"))
        if variant == "jsonl":
            rows = jsonl_rows(run.rng, f"d{run.number}-", lines, document_id="doc-main")
            path = write_jsonl(run.dir / "doc.jsonl", rows)
            new = sorted(r["id"] for r in rows)
            done = run.mem("retain", "--jsonl", str(path), **fault(f"{cmd}:jsonl"))
        else:
            path = run.dir / f"doc{run.number}.txt"
            path.write_text(" ".join(sentence(run.rng, f"v{run.number}-{i}") for i in range(lines)))
            new = None  # the file's facts: all with the file's path as their source
            done = run.mem(
                "retain", "--document", "doc-main", "--file", str(path), **fault(f"{cmd}:file")
            )
        now = sorted(document_sources(db, "doc-main"))
        is_new = now == new if new is not None else (bool(now) and set(now) == {str(path)})
        if acknowledged(done, r"1 documents? replaced"):
            said = done.said(r"(\d+) facts? stored")
            count = int(said.group(1)) if said else len(now)
            run.tally.acked += count
            if not is_new:
                run.lost(count, f"a document replace that said stored ({variant})")
            elif new is None and len(now) != count:
                run.lost(count - len(now), "facts of a replaced document")
        elif now != old and not is_new:
            run.half(f"document doc-main is neither its old nor its new version ({variant})")
        if new is None and is_new:
            # The whole new version: every sentence of the file is in one of its facts.
            joined = " ".join(texts_like(db, f"%(v{run.number}-%"))
            missing = [i for i in range(lines) if f"(v{run.number}-{i})" not in joined]
            if missing:
                run.half(f"the new version lacks {len(missing)} of its sentences")
    elif cmd == "correct":
        fact = suite.correct_id
        tag = f"c{run.number}"
        text = sentence(run.rng, tag)
        done = run.mem("correct", str(fact), text, **fault(cmd))
        closed, by = query(db, "SELECT invalid_at, superseded_by FROM facts WHERE id = ?", fact)[0]
        new = query(db, "SELECT id FROM facts WHERE text LIKE ?", f"%({tag})%")
        if acknowledged(done, r"corrected by"):
            run.tally.acked += 1
            if not new or closed is None or by != new[0][0]:
                run.lost(1, f"a correction that said done (new {new}, closed {closed}, by {by})")
        elif bool(new) != (closed is not None) or (new and by != new[0][0]):
            run.half(f"a correction half made: new fact {new}, old closed {closed} by {by}")
    elif cmd == "forget":
        doomed = s.doomed
        done = run.mem("forget", "--tag", "doomed", "--yes", **fault(cmd))
        left = query(db, "SELECT count(*) FROM fact_tags WHERE tag = 'doomed'")[0][0]
        gone = doomed - left
        if acknowledged(done, rf"forgot {doomed} facts"):
            run.tally.acked += doomed
            run.lost(left, "forgotten facts still there after forget said so")
        elif left not in (0, doomed):
            run.half(f"forget removed {gone} of {doomed}")
    elif cmd == "import":
        into_new = options.get("into_new", run.rng.random() < 0.3)
        vectors = options.get("vectors", run.rng.random() < 0.5)
        file = suite.export_vectors if vectors else suite.export_plain
        target = run.dir / "new" / "mem.db" if into_new else db
        if into_new:
            target.parent.mkdir()
        key = f"{cmd}:{'vectors' if vectors else 'plain'}"
        done = run.mem("import", str(file), "--into", "imp", db=target, **fault(key))
        n = s.imported
        have = fact_count(target, "imp") if target.exists() else 0
        if acknowledged(done, r"imported bank 'imp'"):
            run.tally.acked += n
            run.lost(n - have, f"of an import that said done ({file.name})")
        elif have not in (0, n):
            run.half(f"a killed import left {have} of {n} facts ({file.name})")
        if into_new:
            if not target.exists() and any(
                p.name.startswith("mem.db") for p in target.parent.iterdir()
            ):
                run.half("a failed import into a new path left a store's files there")
            final = target  # (its follow-up retain creates the store when the import did not)
    elif cmd == "reembed":
        n = s.reembedded
        done = run.mem("--bank", "rb", "reembed", "--embedder", "e5", **fault(cmd))
        (model,) = query(db, "SELECT embedder FROM banks WHERE name = 'rb'")[0]
        b = bank_id(db, "rb")
        vectors = query(db, "SELECT count(*) FROM fact_vec WHERE bank_id = ?", b)[0][0]
        if acknowledged(done, r"re-embedded"):
            run.tally.acked += n
            if "e5" not in (model or ""):
                run.lost(n, f"a reembed that said done left the bank on {model}")
        if vectors != n:
            run.half(f"bank rb has {vectors} vectors for {n} facts (model {model})")
        name, off = vectors_off_model(db, "rb")
        if off:
            run.half(f"{len(off)} of bank rb's vectors are not {name}'s: ids {off[:5]}")
        if sig is not None and done.code != 0 and options.get("resume", run.rng.random() < 0.5):
            # The same command again finishes the job (resuming after Ctrl-C).
            again = run.mem("--bank", "rb", "reembed", "--embedder", "e5")
            (model,) = query(db, "SELECT embedder FROM banks WHERE name = 'rb'")[0]
            if not acknowledged(again, r"re-embedded") or "e5" not in (model or ""):
                run.failed(f"reembed after a fault did not finish: {again.err.strip()[-200:]}")
            else:
                run.tally.acked += n
        check = run.mem("--bank", "rb", "recall", "garden", "--limit", "3")
        if check.code != 0:
            run.failed(f"recall on bank rb after the fault: {check.err.strip()}")
    elif cmd == "banks-delete":
        n = s.reembedded
        done = run.mem("banks", "--delete", "rb", "--yes", **fault(cmd))
        have = fact_count(db, "rb")
        if acknowledged(done, r"deleted bank 'rb'"):
            run.tally.acked += n
            run.lost(have, "facts of a bank deleted")
        elif have not in (0, n):
            run.half(f"a killed bank delete left {have} of {n} facts")
    elif cmd == "mcp-retain":
        tags = [f"m{run.number}-{i}" for i in range(s.mcp_texts)]
        texts = [sentence(run.rng, t) for t in tags]
        kill_at = kill_after = None
        if isinstance(at, int):
            kill_after = at
        elif sig is not None:
            kill_at = at if at is not None else suite.kill_time(run, cmd)
        started = time.monotonic()
        acked, refused = mcp_retains(
            run, db, texts, kill_at=kill_at, kill_after=kill_after, sig=sig or signal.SIGKILL
        )
        if sig is None:
            suite.durations[cmd] = time.monotonic() - started
        for text in acked:
            tag = text[text.rindex("(") + 1 : -2]
            run.tally.acked += 1
            if not texts_like(db, f"%({tag})%"):
                run.lost(1, f"an MCP retain that answered ok ({tag})")
        if refused:
            run.note(f"MCP refused {len(refused)}: {refused[0][:200]}")
        if sig is None and len(acked) != len(texts):
            run.failed(f"a clean MCP session stored {len(acked)} of {len(texts)}")
    else:
        raise ValueError(cmd)
    if sig is None and cmd != "mcp-retain":
        suite.durations[timed] = done.seconds
    elif cmd != "mcp-retain":
        hit = "hit" if done.signalled else "missed (it had ended)"
        moment = f"{when:.2f} s" if isinstance(when, float) else "a chosen moment"
        run.note(f"signal at {moment} {hit}: exit {done.code}, {done.err.strip()[-120:]!r}")
    if sig is None and cmd != "mcp-retain" and done.code != 0:
        run.failed(f"{cmd} without a fault: exit {done.code}: {done.err.strip()}")
    # Ctrl-C is a clean stop (130), or too late to matter (0), or came before Python's own
    # handler existed (the signal ended it); a one-line error from a write it cut short is
    # also honest.
    stopped = (0, 130, -signal.SIGINT)
    if sig == signal.SIGINT and cmd != "mcp-retain" and done.signalled and done.code not in stopped:
        if python_start_up(done.err):
            pass  # counted apart (Run.finish): no code of mem's had run
        elif not done.said(r"^mem: error: ") or len(done.err.strip().splitlines()) != 1:
            run.failed(f"Ctrl-C during {cmd}: exit {done.code}: {done.err.strip()[-300:]}")
    tally = run.finish(final)
    litter = [p.name for p in final.parent.glob(".mem.db.*")]
    if litter:
        run.failed(
            f"files a killed process left beside the store outlived the next retain: {litter}"
        )
    return tally


def write_locked(db: Path) -> bool:
    """Whether a process holds the store's write lock now (a foreign client's BEGIN
    IMMEDIATE, not waiting, is refused), as while an import writes its transaction."""
    conn = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()


def acknowledged(done: Done, pattern: str) -> bool:
    return done.code == 0 and done.said(pattern) is not None


# -- concurrent writers and foreign clients ---------------------------------------------------

FOREIGN_WRITER = r"""
import sqlite3, sys, time, random
db, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
end = time.monotonic() + seconds
i = 0
while time.monotonic() < end:
    conn = sqlite3.connect(db, timeout=30)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS foreign_notes(note TEXT PRIMARY KEY)")
        with conn:
            conn.execute("INSERT INTO foreign_notes VALUES(?)", (f"py-{seed}-{i}",))
        print(f"py-{seed}-{i}", flush=True)
        conn.execute("SELECT count(*) FROM facts").fetchone()
    except sqlite3.Error as exc:
        print(f"refused {exc}", file=sys.stderr, flush=True)
    finally:
        conn.close()
    i += 1
    time.sleep(rng.uniform(0, 0.2))
"""


def concurrent_run(run: Run, seconds: float | None = None, races: list[str] | None = None) -> Tally:
    """For a few seconds at once: CLI retains (texts and batches), two MCP servers (one
    retaining and recalling, one retaining), a Python sqlite3 client writing its own table
    and reading facts, the
    sqlite3 shell reading facts and writing that table, and one or two of RACES (random when
    races is None). Every acknowledged write is there."""
    db = run.db
    seconds = seconds or run.rng.uniform(4, 10)
    lock = threading.Lock()
    acked_texts: list[str] = []
    acked_batches: list[tuple[str, int]] = []
    shell_notes: list[str] = []
    errors: list[str] = []
    writers_extra: list[threading.Thread] = []

    def cli_writer(w: int) -> None:
        end = time.monotonic() + seconds
        k = 0
        while time.monotonic() < end:
            k += 1
            if run.rng.random() < 0.5:
                tag = f"w{run.number}-{w}-{k}"
                done = run.mem("retain", sentence(random.Random(tag), tag))
                if acknowledged(done, r"1 facts? stored"):
                    with lock:
                        acked_texts.append(tag)
                elif done.code != 0:
                    errors.append(done.err.strip())
            else:
                prefix = f"cb{run.number}-{w}-{k}-"
                n = 20
                path = write_jsonl(
                    run.dir / f"{prefix}.jsonl", jsonl_rows(random.Random(prefix), prefix, n)
                )
                done = run.mem("retain", "--jsonl", str(path))
                if acknowledged(done, rf"{n} facts stored"):
                    with lock:
                        acked_batches.append((prefix, n))
                elif done.code != 0:
                    errors.append(done.err.strip())

    def shell_client() -> None:
        end = time.monotonic() + seconds
        k = 0
        while time.monotonic() < end:
            k += 1
            if shutil.which("sqlite3") is None:
                return
            note = f"sh-{run.number}-{k}"
            if k % 3 == 0:
                sql = (
                    "CREATE TABLE IF NOT EXISTS foreign_notes(note TEXT PRIMARY KEY);"
                    f"INSERT INTO foreign_notes VALUES('{note}');"
                )
            else:
                sql = "SELECT count(*) FROM facts;"
            done = subprocess.run(
                ["sqlite3", "-cmd", ".timeout 30000", str(db), sql], capture_output=True, text=True
            )
            run.seen("sqlite3 shell", done.stderr)
            run.tally.faults += 1
            if done.returncode == 0 and "INSERT" in sql:
                shell_notes.append(note)
            time.sleep(run.rng.uniform(0, 0.3))

    racers = races if races is not None else run.rng.sample(list(RACES), run.rng.choice([1, 2]))
    run.note(f"races: {', '.join(racers) or 'none'}")
    checks = []
    for name in racers:
        targets, check = RACES[name](run, db, seconds)
        checks.append(check)
        writers_extra.extend(threading.Thread(target=t) for t in targets)
    foreign = subprocess.Popen(
        [sys.executable, "-c", FOREIGN_WRITER, str(db), str(seconds), str(run.number)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    writers = [threading.Thread(target=cli_writer, args=(w,)) for w in range(2)]
    writers.append(threading.Thread(target=shell_client))
    writers += writers_extra
    for t in writers:
        t.start()
    # Two agents: a second MCP server beside the first, on its own thread.
    second: list[tuple[list[str], list[str]]] = []
    texts2 = [sentence(run.rng, f"md{run.number}-{i}") for i in range(int(seconds * 2))]
    agent = threading.Thread(target=lambda: second.append(mcp_retains(run, db, texts2)))
    agent.start()
    tags = [f"mc{run.number}-{i}" for i in range(int(seconds * 3))]
    mcp_acked, refused = mcp_retains(run, db, [sentence(run.rng, t) for t in tags], recall_every=3)
    agent.join()
    if second:
        mcp_acked += second[0][0]
        refused += second[0][1]
    else:
        run.failed("the second MCP session did not end")
    for t in writers:
        t.join()
    out, err = foreign.communicate(timeout=120)
    run.seen(
        "python sqlite3 client",
        "\n".join(line for line in err.splitlines() if not line.startswith("refused")),
    )
    py_notes = out.split()
    run.tally.faults += len(py_notes) + 2  # each foreign commit, and the two CLI writers
    # count
    for tag in acked_texts:
        run.tally.acked += 1
        if not texts_like(db, f"%({tag})%"):
            run.lost(1, f"a CLI retain ({tag})")
    for prefix, n in acked_batches:
        run.tally.acked += n
        run.lost(n - len(source_ids(db, like=f"{prefix}%")), f"of a CLI batch ({prefix})")
    for text in mcp_acked:
        tag = text[text.rindex("(") + 1 : -2]
        run.tally.acked += 1
        if not texts_like(db, f"%({tag})%"):
            run.lost(1, f"an MCP retain ({tag})")
    for text in refused:
        run.failed(f"MCP retain refused beside other writers: {text[:200]}")
    for e in errors:
        run.failed(f"a CLI retain failed beside other writers: {e[-200:]}")
    notes = (
        {r[0] for r in query(db, "SELECT note FROM foreign_notes")}
        if py_notes or shell_notes
        else set()
    )
    acked_notes = set(py_notes) | set(shell_notes)
    run.tally.acked += len(acked_notes)
    run.lost(len(acked_notes - notes), "rows foreign clients committed")
    for check in checks:
        check()
    return run.finish()


# What else may race the writers above: each gives the thread targets to start with them
# and the check to make once everything has ended.


def race_documents(run: Run, db: Path, seconds: float):
    """Two processes replace document doc-main at once: it ends as one version, whole,
    one that a process acknowledged (or the old one when neither did)."""
    old = document_sources(db, "doc-main")
    versions = []
    for v in range(2):
        prefix = f"rv{run.number}-{v}-"
        rows = jsonl_rows(random.Random(prefix), prefix, 100, document_id="doc-main")
        versions.append(
            (write_jsonl(run.dir / f"{prefix}.jsonl", rows), sorted(r["id"] for r in rows))
        )
    results: list[Done | None] = [None, None]

    def go(v: int) -> None:
        results[v] = run.mem("retain", "--jsonl", str(versions[v][0]))

    def check() -> None:
        now = document_sources(db, "doc-main")
        acked = [v for v in range(2) if results[v] and acknowledged(results[v], "1 documents")]
        run.tally.acked += 100 * len(acked)
        if now not in [versions[v][1] for v in acked] + ([] if acked else [old]):
            if now in [versions[v][1] for v in range(2)] + [old]:
                run.lost(100, f"doc-main is not a version a replace acknowledged ({acked})")
            else:
                run.half("two replaces at once left doc-main neither version whole")
        for v in range(2):
            if results[v] and v not in acked:
                one_line_error(run, results[v])

    return [lambda: go(0), lambda: go(1)], check


def race_corrections(run: Run, db: Path, seconds: float):
    """Two corrections of one fact at once: at most one lands, whole; the other is refused
    and stores nothing."""
    fact = run.suite.correct_id
    tags = [f"rc{run.number}-{v}" for v in range(2)]
    results: list[Done | None] = [None, None]

    def go(v: int) -> None:
        time.sleep(run.rng.uniform(0, 0.2))
        results[v] = run.mem("correct", str(fact), sentence(random.Random(tags[v]), tags[v]))

    def check() -> None:
        acked = [v for v in range(2) if results[v] and acknowledged(results[v], "corrected by")]
        present = [v for v in range(2) if texts_like(db, f"%({tags[v]})%")]
        by = query(db, "SELECT superseded_by FROM facts WHERE id = ?", fact)[0][0]
        run.tally.acked += len(acked)
        if len(acked) > 1:
            run.failed("two corrections of one fact both said done")
        for v in acked:
            new = query(db, "SELECT id FROM facts WHERE text LIKE ?", f"%({tags[v]})%")
            if not new or by != new[0][0]:
                run.lost(1, f"an acknowledged correction ({tags[v]}) is not the fact's")
        for v in set(present) - set(acked):
            run.half(f"a refused correction ({tags[v]}) stored its text")
        for v in range(2):
            if results[v] and v not in acked:
                one_line_error(run, results[v])

    return [lambda: go(0), lambda: go(1)], check


def race_imports(run: Run, db: Path, seconds: float):
    """Two imports into one new bank name at once: one makes it whole, the other is
    refused."""
    results: list[Done | None] = [None, None]
    n = run.suite.sizes.imported

    def go(v: int) -> None:
        results[v] = run.mem("import", str(run.suite.export_vectors), "--into", "imp")

    def check() -> None:
        acked = [v for v in range(2) if results[v] and acknowledged(results[v], "imported bank")]
        have = fact_count(db, "imp")
        run.tally.acked += n * len(acked)
        if len(acked) > 1:
            run.failed("two imports into one bank name both said done")
        if acked and have != n:
            run.lost(n - have, "of an acknowledged import")
        elif have not in (0, n):
            run.half(f"bank imp has {have} of {n} facts")
        for v in range(2):
            if results[v] and v not in acked:
                one_line_error(run, results[v])

    return [lambda: go(0), lambda: go(1)], check


def race_reembed(run: Run, db: Path, seconds: float):
    """A reembed of bank rb while a process retains into rb: every acknowledged retain is
    there, and every vector of rb is the embedding of its fact by rb's model."""
    results: list[Done] = []
    tags: list[str] = []

    def reembed() -> None:
        results.append(run.mem("--bank", "rb", "reembed", "--embedder", "e5"))

    def writer() -> None:
        end = time.monotonic() + seconds
        k = 0
        while time.monotonic() < end:
            k += 1
            tag = f"rr{run.number}-{k}"
            done = run.mem("--bank", "rb", "retain", sentence(random.Random(tag), tag))
            if acknowledged(done, r"1 facts? stored"):
                tags.append(tag)
            elif done.code != 0:
                one_line_error(run, done)
                run.note(f"a retain into rb beside reembed refused: {done.err.strip()[-150:]}")

    def check() -> None:
        for tag in tags:
            run.tally.acked += 1
            if not texts_like(db, f"%({tag})%", bank="rb"):
                run.lost(1, f"a retain into rb beside reembed ({tag})")
        if results and acknowledged(results[0], "re-embedded"):
            run.tally.acked += run.suite.sizes.reembedded
        elif results:
            one_line_error(run, results[0])
        name, off = vectors_off_model(db, "rb")
        if off:
            run.lost(len(off), f"facts of rb whose vector is not {name}'s (ids {off[:5]})")

    return [reembed, writer], check


RACES = {
    "documents": race_documents,
    "corrections": race_corrections,
    "imports": race_imports,
    "reembed": race_reembed,
}


# -- a full disk -----------------------------------------------------------------------------


def full_disk_run(run: Run) -> Tally:
    """Writes (batches, texts, a document replace, an import, a correction, forget, and an
    MCP server kept open throughout) until the disk is full; then reads on the full disk;
    then room again, and the server and the CLI must store again; then the count. Root: a
    tmpfs a little larger than the store, sometimes filled to its last byte at once;
    otherwise each writer's files are bounded (RLIMIT_FSIZE) a little above their size."""
    if is_root():
        ballast = 2 << 20  # freed at the end: room for the server's and the CLI's next retain
        size = sum(p.stat().st_size for p in run.suite.base.iterdir()) + run.rng.randrange(
            64 << 10, 3 << 20
        )
        with tmpfs(size + ballast, run.dir) as folder:
            db = run.copy_store(folder)
            (folder / ".ballast").write_bytes(b"\0" * ballast)
            if run.rng.random() < 0.3:
                fill(folder)
            live = LiveMcp(run, db)
            try:
                writes_until_full(run, db, None, live)
                reads_on_a_full_disk(run, db, None)
                for name in (".ballast", ".filler"):
                    (folder / name).unlink(missing_ok=True)
                tag = f"fl{run.number}-room"
                ok, message = live.retain(sentence(run.rng, tag))
                if ok:
                    run.ledger.mcp.append(tag)  # type: ignore[attr-defined]
                else:
                    run.failed(f"the MCP server did not store once there was room: {message}")
                tag = f"fc{run.number}-room"
                done = run.mem("retain", sentence(run.rng, tag), db=db)
                if acknowledged(done, r"1 facts? stored"):
                    run.ledger.texts.append(tag)  # type: ignore[attr-defined]
                else:
                    run.failed(f"the CLI did not store once there was room: {done.err.strip()}")
            finally:
                live.close()
            out = run.dir / "after"
            out.mkdir()
            for name in STORE_FILES:
                if (folder / name).exists():
                    shutil.copy2(folder / name, out / name)
            # (staging locks and leftovers stay behind: no process runs)
        count_full_disk(run, out / "mem.db")
        return run.finish(out / "mem.db")
    db = run.db
    writes_until_full(
        run, db, lambda: db.stat().st_size + run.rng.randrange(16 << 10, 512 << 10), None
    )
    reads_on_a_full_disk(run, db, 1)
    count_full_disk(run, db)
    return run.finish()


@dataclass
class FullDiskLedger:
    texts: list[str] = field(default_factory=list)
    batches: list[tuple[str, int]] = field(default_factory=list)
    failed_batches: list[tuple[str, int, str]] = field(default_factory=list)
    mcp: list[str] = field(default_factory=list)
    document: list[str] = field(default_factory=list)  # doc-main's acknowledged version
    imports: dict[str, bool] = field(default_factory=dict)  # bank: acknowledged


def writes_until_full(run: Run, db: Path, fsize_of, live: LiveMcp | None) -> None:
    ledger = FullDiskLedger(document=run.suite.document_v0)
    run.ledger = ledger  # type: ignore[attr-defined]
    refusals = 0
    k = 0
    while refusals < 3 and k < 60:
        k += 1
        fsize = fsize_of() if fsize_of else None
        what = run.rng.choice(["batch", "batch", "text", "forget", "correct", "document", "import"])
        done = None
        if what == "batch":
            prefix = f"fb{run.number}-{k}-"
            n = run.rng.choice([30, 64, 100, 200])
            path = write_jsonl(run.dir / f"{prefix}.jsonl", jsonl_rows(run.rng, prefix, n))
            done = run.mem("retain", "--jsonl", str(path), db=db, fsize=fsize)
            if acknowledged(done, rf"{n} facts stored"):
                ledger.batches.append((prefix, n))
            else:
                ledger.failed_batches.append((prefix, n, done.err))
        elif what == "text":
            tag = f"ft{run.number}-{k}"
            done = run.mem("retain", sentence(run.rng, tag), db=db, fsize=fsize)
            if acknowledged(done, r"1 facts? stored"):
                ledger.texts.append(tag)
        elif what == "document":
            prefix = f"fd{run.number}-{k}-"
            rows = jsonl_rows(run.rng, prefix, 80, document_id="doc-main")
            path = write_jsonl(run.dir / f"{prefix}.jsonl", rows)
            done = run.mem("retain", "--jsonl", str(path), db=db, fsize=fsize)
            if acknowledged(done, r"1 documents? replaced"):
                ledger.document = sorted(r["id"] for r in rows)
        elif what == "import":
            bank = f"imp{k}"
            done = run.mem(
                "import", str(run.suite.export_vectors), "--into", bank, db=db, fsize=fsize
            )
            ledger.imports[bank] = acknowledged(done, r"imported bank")
        elif what == "forget":
            done = run.mem("forget", "--tag", "doomed", "--yes", db=db, fsize=fsize)
        else:
            done = run.mem(
                "correct",
                str(run.suite.correct_id),
                f"Corrected on a full disk {k}.",
                db=db,
                fsize=fsize,
            )
            if done.code != 0 and "already corrected" in done.err:
                continue  # corrected by an earlier step: not a disk matter
        if done.code != 0:
            refusals += 1
            run.tally.faults += 1
            run.note(f"{what} refused: {done.err.strip()[-160:]}")
            one_line_error(run, done, "disk full")
        if live is not None:
            tag = f"fm{run.number}-{k}"
            ok, message = live.retain(sentence(run.rng, tag))
            if ok:
                ledger.mcp.append(tag)
            else:
                refusals += 1
                run.tally.faults += 1
                if "disk full" not in message or "\n" in message.strip():
                    run.failed(f"an MCP retain on a full disk answered: {message[:300]}")
    if refusals == 0:
        run.note("the disk never filled")


def reads_on_a_full_disk(run: Run, db: Path, fsize: int | None) -> None:
    """Commands that only read answer on a full disk (export, list, show, banks); recall
    and stats open the store for writing: they may answer or say the disk is full; doctor
    checks the store and fails, if at all, only on free space."""
    for args in (
        ["export"],
        ["list", "--limit", "5"],
        ["show", str(run.suite.correct_id)],
        ["banks"],
    ):
        done = run.mem(*args, db=db, fsize=fsize)
        if done.code != 0:
            run.failed(f"{args[0]} on a full disk: {done.err.strip()}")
    for args in (["recall", "garden"], ["stats"]):
        done = run.mem(*args, db=db, fsize=fsize)
        if done.code != 0:
            one_line_error(run, done, "disk full")
    doctor = run.mem("doctor", db=db, fsize=fsize)
    failed = [line for line in doctor.out.splitlines() if line.startswith("FAIL")]
    if [line for line in failed if not line.startswith("FAIL  free space:")]:
        run.failed(f"doctor on a full disk: {failed}")


def count_full_disk(run: Run, db: Path) -> None:
    ledger: FullDiskLedger = run.ledger  # type: ignore[attr-defined]
    for tag in ledger.texts + ledger.mcp:
        run.tally.acked += 1
        if not texts_like(db, f"%({tag})%"):
            run.lost(1, f"a retain on a filling disk ({tag})")
    for prefix, n in ledger.batches:
        run.tally.acked += n
        run.lost(n - len(source_ids(db, like=f"{prefix}%")), f"of a batch ({prefix})")
    if document_sources(db, "doc-main") != ledger.document:
        run.half("doc-main is not the version last acknowledged, whole")
    for bank, acked in ledger.imports.items():
        have, n = fact_count(db, bank), run.suite.sizes.imported
        if acked:
            run.tally.acked += n
            run.lost(n - have, f"of an acknowledged import ({bank})")
        elif have:
            run.half(f"a refused import left bank {bank} with {have} facts")
    for prefix, n, err in ledger.failed_batches:
        m = len(source_ids(db, like=f"{prefix}%"))
        kept = re.search(r"the (\d+) items of the batches before it stay stored", err)
        if kept and int(kept.group(1)) != m:
            run.half(f"a failed batch said {kept.group(1)} items stay stored; {m} are")
        elif not kept and m and "nothing was written" in err:
            run.half(f"a batch said 'nothing was written' but {m} of its {n} items are stored")
        elif m % 64 and m != n:
            run.half(f"a failed batch kept {m} of {n} items, not whole batches of 64")
        elif m and m == n:
            run.half(f"a batch that failed ({err.strip()[-100:]}) kept all its {n} items")


# -- read-only media -------------------------------------------------------------------------

READS = [
    ["recall", "garden"],
    ["list", "--limit", "5"],
    ["stats"],
    ["banks"],
    ["export"],
    ["doctor"],
]


UNCLEAN_WRITER = """
import os, sys
from memcli.models.load import load_embedder
from memcli.retain import Retainer, RetainItem
from memcli.store import Store
store = Store(sys.argv[1])
Retainer(store, "default", load_embedder()).retain([RetainItem(text=sys.argv[2])])
os._exit(0)  # no close: the commit stays in the -wal
"""


def read_only_run(run: Run) -> Tally:
    """The store on a read-only mount (root) or in an unwritable folder: every read answers,
    every write is refused in one line, the MCP server refuses a retain and keeps serving,
    and no byte changes."""
    hows = ["mount", "folder"] if is_root() else ["folder"]
    how = run.rng.choice(hows)
    media = run.dir / "media"
    media.mkdir()
    db = run.copy_store(media)
    unclean = run.rng.random() < 0.3
    if unclean:
        # A store whose last writer died with its commit in the -wal (and its -shm beside):
        # what is on the media is that state, which reads must see.
        tag = f"u{run.number}"
        done = run.run(
            [sys.executable, "-c", UNCLEAN_WRITER, str(db), sentence(run.rng, tag)], timeout=300
        )
        if done.code != 0 or not Path(f"{db}-wal").exists():
            run.failed(f"could not leave a -wal behind: {done.err.strip()[-200:]}")
    run.note(f"{how}{', with a -wal' if unclean else ''}")
    before = digest(media)
    writes = [
        ["retain", "Written on read-only media."],
        ["forget", "--tag", "doomed", "--yes"],
        ["correct", str(run.suite.correct_id), "Corrected on read-only media."],
        ["import", str(run.suite.export_vectors), "--into", "imp"],
        ["banks", "--rename", "rb", "rb2"],
    ]
    with read_only_media(media, how) as ro_db:
        for args in [*READS, ["show", str(run.suite.correct_id)]]:
            done = run.mem(*args, db=ro_db)
            if done.code != 0:
                run.failed(f"{args[0]} on read-only media ({how}): {done.err.strip()}")
            elif unclean and args[0] in ("list", "export") and f"({tag})" not in done.out:
                run.lost(1, f"{args[0]} on read-only media does not show the -wal's commit")
        for args in run.rng.sample(writes, 3):
            done = run.mem(*args, db=ro_db)
            run.tally.faults += 1
            one_line_error(run, done, "read-only", "cannot be written")
        acked, refused = mcp_retains(run, ro_db, ["An MCP retain on read-only media."])
        if acked:
            run.lost(1, "an MCP retain answered ok on read-only media")
        run.tally.faults += 1
        if not refused or "read-only" not in refused[0]:
            run.failed(f"MCP retain on read-only media answered {refused}")
    if digest(media) != before:
        run.failed(f"the store's files changed on read-only media ({how})")
    return run.finish(db)


# -- the table -------------------------------------------------------------------------------

COLUMNS = [
    "runs",
    "faults",
    "acked",
    "lost",
    "half",
    "tracebacks",
    "start_up",
    "unexpected",
    "failed",
]


def table(tallies: dict[str, Tally]) -> str:
    total = Tally()
    for t in tallies.values():
        total.add(t)
    rows = [(kind, t) for kind, t in tallies.items() if t.runs] + [("all", total)]
    width = max(len(k) for k, _ in rows)
    head = f"{'fault':<{width}}  " + "  ".join(f"{c:>10}" for c in COLUMNS)
    lines = [head, "-" * len(head)]
    for kind, t in rows:
        lines.append(f"{kind:<{width}}  " + "  ".join(f"{getattr(t, c):>10}" for c in COLUMNS))
    return "\n".join(lines)


def _run_all(
    suite: Suite, kinds: list[str], runs: int, order: random.Random, tallies: dict[str, Tally]
) -> None:
    """Every kind once per round, in an order shuffled each round, until `runs` runs."""
    rounds: list[str] = []
    for i in range(runs):
        if not rounds:
            rounds = order.sample(kinds, len(kinds))
        kind = rounds.pop()
        tally = suite.one(kind)
        tallies[kind].add(tally)
        flag = "BAD " if tally.bad else ""
        progress(
            f"[{i + 1}/{runs}] {flag}{kind}: faults {tally.faults}, acked "
            f"{tally.acked}, lost {tally.lost}" + "".join(f"\n    {n}" for n in tally.notes)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=240, help="runs in all (default 240)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small stores and one run of each kind (about 3 minutes)",
    )
    parser.add_argument("--only", nargs="+", metavar="KIND", help=f"some of: {' '.join(KINDS)}")
    parser.add_argument("--keep", type=Path, help="copy the folders of bad runs here")
    args = parser.parse_args(argv)
    # Ctrl-C (even where a shell started this in the background, ignoring it) and SIGTERM
    # stop the suite through its finally blocks, which unmount its file systems.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    kinds = args.only or KINDS
    for kind in kinds:
        if kind not in KINDS:
            parser.error(f"unknown fault kind {kind!r} (use {', '.join(KINDS)})")
    runs = len(kinds) if args.quick and args.runs == 240 else args.runs
    sizes = Sizes.quick() if args.quick else Sizes()
    with tempfile.TemporaryDirectory(prefix="mem-faults-") as work:
        suite = Suite(Path(work), args.seed, sizes, keep=args.keep)
        started = time.monotonic()
        progress(f"preparing the store ({'quick' if args.quick else 'full'} sizes)")
        suite.prepare(calibrate=any(":" in kind for kind in kinds))
        tallies = {kind: Tally(runs=0) for kind in kinds}
        order = random.Random(args.seed)
        try:
            _run_all(suite, kinds, runs, order, tallies)
        except KeyboardInterrupt:
            progress(f"interrupted after {sum(t.runs for t in tallies.values())} runs")
            runs = sum(t.runs for t in tallies.values())
        elapsed = time.monotonic() - started

    print(
        f"python scripts/faults.py --runs {runs} --seed {args.seed}"
        + (" --quick" if args.quick else "")
        + (f" --only {' '.join(kinds)}" if args.only else "")
    )
    print(table(tallies))
    media = (
        "root: tmpfs and read-only mounts"
        if is_root()
        else "not root: RLIMIT_FSIZE and unwritable folders"
    )
    print(f"({elapsed / 60:.1f} min; {media})")
    bad = [
        n
        for t in tallies.values()
        for n in t.notes
        if re.search(r"LOST|HALF|TRACEBACK|PYTHON START-UP|UNEXPECTED|FAILED", n)
    ]
    if bad:
        print("\nproblems:")
        for n in bad:
            print(f"  {n}")
    return 1 if any(t.bad for t in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
