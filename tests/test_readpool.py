"""A long-lived Memory serves reads beside a write (memcli/readpool.py): a read does not wait
for a write in progress, not even one inside its transaction; writes wait for each other;
a cancelled write writes nothing; a reader an unfinished iterator keeps never blocks the
next read for good."""

from __future__ import annotations

import threading
import time

import pytest

from memcli import Memory, readpool
from memcli.errors import Cancelled


def test_reads_do_not_wait_for_a_write_and_writes_wait_for_each_other(db_path):
    memory = Memory(db_path)
    memory.retain("The harbour opens at six.")
    in_write, release = threading.Event(), threading.Event()

    def long_write() -> None:
        with memory.store() as store, store.atomic():
            store.core.set_meta("probe", "1")  # the write transaction is open and holds the lock
            in_write.set()
            release.wait(60)

    writer = threading.Thread(target=long_write)
    writer.start()
    try:
        assert in_write.wait(60)
        got: dict = {}

        def reads() -> None:
            got["listed"] = [f.text for f in memory.list()]
            got["recalled"] = memory.recall("harbour opens").results
            got["banks"] = memory.banks()

        reader = threading.Thread(target=reads)
        reader.start()
        reader.join(60)  # (before: it waited for the write to end, here never)
        assert not reader.is_alive(), "a read waited for the write"
        assert got["listed"] == ["The harbour opens at six."]
        assert got["recalled"] and got["banks"][0].facts == 1
        # Another write waits for the first: it has not happened while the first runs.
        second = threading.Thread(target=lambda: memory.retain("The harbour closes at ten."))
        second.start()
        time.sleep(0.5)
        assert second.is_alive()
    finally:
        release.set()
        writer.join(60)
    second.join(120)
    assert sorted(f.text for f in memory.list()) == [
        "The harbour closes at ten.",
        "The harbour opens at six.",
    ]
    memory.close()


def test_a_cancelled_retain_writes_nothing(db_path):
    memory = Memory(db_path)
    memory.retain("The harbour opens at six.")
    text = " ".join(f"Entry {i} records a crate for dock {i % 9}." for i in range(300))
    asked = []

    def cancelled() -> bool:
        asked.append(True)
        return len(asked) > 4  # the caller gives up while the text is being embedded

    with pytest.raises(Cancelled, match="nothing was stored"):
        memory.retain(text, cancelled=cancelled)
    assert [f.text for f in memory.list()] == ["The harbour opens at six."]
    memory.close()


def test_an_unfinished_iterator_does_not_block_the_next_read(db_path, monkeypatch):
    monkeypatch.setattr(readpool, "SLOT_WAIT_SECONDS", 0.2)
    memory = Memory(db_path, readers=1)
    memory.retain("One.")
    memory.retain("Two.")
    held = memory.iter_facts()
    assert next(held).text  # its reader stays out until the iterator ends
    t0 = time.monotonic()
    assert len(memory.list()) == 2
    assert time.monotonic() - t0 < 30
    held.close()
    memory.close()
