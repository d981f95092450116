"""Loading an embedder in the background while a command does its other start-up work.

llama.cpp reads a model with Python's lock released, so on a second core the ~50 ms of a
cold load overlap the command's imports, store opening and bank reads. This module imports
nothing heavy itself: numpy and the model code are imported by the thread.
"""

from __future__ import annotations

import threading


def preload_embedder(spec: str | None) -> None:
    """Start loading the embedder of this spec (None: the default) in a daemon thread; the
    command's own load_embedder call then waits for it and gets the same object. A built-in
    model not converted yet is left to the command (a process that ends early would leave a
    half-written conversion behind); errors are left to the command's own call, which
    reports them in one line."""

    def load() -> None:
        try:
            from memcli.models.load import converted, load_embedder, spec_builtin

            name = spec_builtin(spec)
            if name is None or converted(name):
                load_embedder(spec)
        except Exception:  # noqa: BLE001 - the command's own load reports it
            pass

    threading.Thread(target=load, name="mem-preload", daemon=True).start()
