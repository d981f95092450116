"""llama.cpp's C API through llama-cpp-python's ctypes bindings, without its high-level layer.

`import llama_cpp` runs the package's __init__, which imports the high-level `Llama` class and
with it the chat formats (jinja2), grammars and samplers: ~45 ms of every cold `mem recall`
that only needs to decode one query. `bindings()` loads the `llama_cpp.llama_cpp` module
alone (the ctypes prototypes and the shared library), under a stand-in for the package that
is removed again afterwards, so a later `import llama_cpp` anywhere in the process (a plugin,
a test) still runs the real package, which then reuses the module already loaded.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

_lock = threading.Lock()
_backend_ready = False
_quiet_callback: Any = None


def bindings() -> Any:
    """The `llama_cpp.llama_cpp` module (llama.cpp's C functions), loaded once."""
    loaded = sys.modules.get("llama_cpp.llama_cpp")
    if loaded is not None:
        return loaded
    with _lock:
        if "llama_cpp" in sys.modules:  # the real package is already imported
            return importlib.import_module("llama_cpp.llama_cpp")
        spec = importlib.util.find_spec("llama_cpp")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("llama-cpp-python is not installed")
        stand_in = types.ModuleType("llama_cpp")
        stand_in.__path__ = list(spec.submodule_search_locations)
        stand_in.__spec__ = spec
        sys.modules["llama_cpp"] = stand_in
        try:
            return importlib.import_module("llama_cpp.llama_cpp")
        finally:
            if sys.modules.get("llama_cpp") is stand_in:
                del sys.modules["llama_cpp"]


def ready() -> Any:
    """The bindings with the backend initialised and llama.cpp's logging silenced (mem's
    stdout is read by programs and LLMs; llama-cpp-python's own callback still prints
    errors to stderr, ours drops all). The ctypes callback lives in a module global so it
    is never collected."""
    global _backend_ready
    lib = bindings()
    with _lock:
        silence(lib)
        if not _backend_ready:
            lib.llama_backend_init()
            _backend_ready = True
    return lib


def silence(lib: Any) -> None:
    """Route llama.cpp's log to nowhere. Called before every load and decode: importing the
    real llama_cpp package later in the process (a plugin, `mem doctor`) installs its own
    callback, which prints warnings such as "decode: cannot decode batches with this
    context" to stderr."""
    global _quiet_callback, _quiet_code
    if _quiet_callback is None:

        def _drop(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            return None

        _quiet_code = _drop.__code__
        _quiet_callback = lib.llama_log_callback(_drop)
    lib.llama_log_set(_quiet_callback, ctypes.c_void_p(0))


# Ctrl-C while llama.cpp runs our log callback raised KeyboardInterrupt inside it, where
# ctypes can only print it ("Exception ignored on calling ctypes callback") and carry on:
# the interrupt was lost. So the SIGINT handler (cli.py) leaves it here instead, and the
# decode that was running raises it once llama.cpp returns.
_quiet_code: Any = None
_deferred_interrupt = False


def defer_interrupt_in_callback(frame: Any) -> bool:
    """For a SIGINT handler: whether `frame` (the interrupted one) is the log callback's; if
    so the interrupt is kept for raise_deferred_interrupt()."""
    global _deferred_interrupt
    if frame is None or _quiet_code is None or frame.f_code is not _quiet_code:
        return False
    _deferred_interrupt = True
    return True


def raise_deferred_interrupt() -> None:
    """Raise the KeyboardInterrupt a SIGINT during the log callback left, if any."""
    global _deferred_interrupt
    if _deferred_interrupt:
        _deferred_interrupt = False
        raise KeyboardInterrupt


def model_metadata(lib: Any, model: Any) -> dict[str, str]:
    """Every GGUF metadata key of a loaded model and its value as text."""
    out: dict[str, str] = {}
    size = 1024
    buffer = ctypes.create_string_buffer(size)
    for i in range(lib.llama_model_meta_count(model)):
        parts = []
        for read in (lib.llama_model_meta_key_by_index, lib.llama_model_meta_val_str_by_index):
            n = read(model, i, buffer, size)
            if n >= size:
                size = n + 1
                buffer = ctypes.create_string_buffer(size)
                n = read(model, i, buffer, size)
            parts.append(buffer.value.decode("utf-8", errors="replace"))
        out[parts[0]] = parts[1]
    return out
