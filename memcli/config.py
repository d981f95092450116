"""mem's settings: a TOML file, MEM_* environment variables and flags, in that rising order.

Every setting has one name used everywhere: the key in the file, MEM_<KEY> in the
environment, and (where a command has it) the --flag. A value's source is kept with it, so
`--trace` can say where each one came from (flag > env > config > default).

The file lives in the platformdirs user config dir (~/.config/mem/config.toml), or at
$MEM_CONFIG. It is flat: `key = value` lines; `mem config set` edits the key's line only.
Standard library only (tomllib reads; the writer is below): the CLI loads this at start-up.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memcli.errors import MemError

APP_NAME = "mem"
ENV_CONFIG = "MEM_CONFIG"


class ConfigError(MemError, ValueError):
    """A bad config file or value (one-line message)."""


def _choice(*allowed: str) -> Callable[[str], str]:
    def check(raw: str) -> str:
        value = str(raw).strip()
        if value not in allowed:
            raise ConfigError(f"{value!r} is not one of {', '.join(allowed)}")
        return value

    return check


INT64_MAX = 2**63 - 1  # memcli.store.INT64_MAX (importing the store here loads apsw)


def _positive_int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ConfigError(f"{raw!r} is not a positive whole number")
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"{raw!r} is not a positive whole number") from None
    if value <= 0:
        raise ConfigError(f"{raw!r} is not a positive whole number")
    if value > INT64_MAX:  # as the flags are checked (cliparams): SQLite's largest integer
        raise ConfigError(f"{raw!r} is out of range (at most {INT64_MAX})")
    return value


# llama.cpp's own limit (GGML_MAX_N_THREADS); beyond it, or where the system cannot start
# that many, it crashed the process (a segmentation fault at 65,535, printing nothing).
MAX_THREADS = 512


def _thread_count(raw: Any) -> int:
    value = _positive_int(raw)
    if value > MAX_THREADS:
        raise ConfigError(f"{raw!r} is more threads than llama.cpp runs (at most {MAX_THREADS})")
    return value


def _text(raw: Any) -> str:
    value = str(raw).strip()
    if not value:
        raise ConfigError("the value is empty")
    return value


def _path(raw: Any) -> str:
    """A file path, absolute (a relative one in the config file would move with the cwd)."""
    return str(Path(_text(raw)).expanduser().absolute())


def _store_location(raw: Any) -> str:
    """The store: a file path (made absolute, as _path), or a postgresql:// URL as given;
    never another URL taken for a path: a URL made a folder named "postgresql:" with a
    SQLite store inside."""
    from memcli.paths import store_location_problem
    from memcli.storeurl import is_postgres_url

    value = _text(raw)
    problem = store_location_problem(value)
    if problem:
        raise ConfigError(problem)
    if is_postgres_url(value):
        return value
    return _path(value)


def _model(raw: Any) -> str:
    """A model file path (~ expanded) or a model name the loader knows."""
    value = _text(raw)
    return str(Path(value).expanduser()) if value.startswith("~") else value


@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    help: str

    @property
    def env(self) -> str:
        return f"MEM_{self.name.upper()}"


def _default_db() -> str:
    from memcli.paths import data_dir

    return str(data_dir() / "mem.db")


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key(
            "db",
            _store_location,
            _default_db,
            "database file or postgresql:// URL (default: the user data dir's mem.db)",
        ),
        Key("bank", _text, "default", "memory bank inside the file"),
        Key("budget", _choice("low", "mid", "high"), "mid", "recall candidates per arm"),
        Key("max_tokens", _positive_int, 4096, "recall's token budget"),
        Key("format", _choice("text", "json", "md"), "text", "recall's output format"),
        Key("embedder", _model, None, "embedding model GGUF (default: the bank's model, else e5)"),
        Key("reranker", _path, None, "cross-encoder GGUF (RANK pooling); default none"),
        Key(
            "threads",
            _thread_count,
            None,
            "llama.cpp threads (default: 1 for a query, measured for bulk)",
        ),
        Key("forget_limit", _positive_int, 100, "most facts one MCP forget removes"),
        Key("mcp_token_file", _path, None, "file holding mem mcp --http's bearer token"),
    )
}


@dataclass(frozen=True)
class Setting:
    """A resolved value and where it came from: 'flag', 'env MEM_X', 'config PATH', 'default'."""

    value: Any
    source: str


def config_path() -> Path:
    """$MEM_CONFIG, else <user config dir>/config.toml."""
    override = os.environ.get(ENV_CONFIG)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / "config.toml"


def load_file(path: Path | None = None) -> dict[str, Any]:
    """The config file's values, checked (missing file: none). Unknown keys are errors, so a
    typo is not silently ignored."""
    import tomllib

    path = path or config_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config {path} is not valid TOML: {exc}") from None
    out: dict[str, Any] = {}
    for name, value in data.items():
        key = KEYS.get(name)
        if key is None:
            raise ConfigError(f"config {path}: unknown key {name!r} (keys: {', '.join(KEYS)})")
        try:
            out[name] = key.parse(value)
        except ConfigError as exc:
            raise ConfigError(f"config {path}: {name}: {exc}") from None
    return out


def parse_value(name: str, raw: Any) -> Any:
    key = KEYS.get(name)
    if key is None:
        raise ConfigError(f"unknown key {name!r} (keys: {', '.join(KEYS)})")
    try:
        return key.parse(raw)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None


class Settings:
    """Resolves keys against one reading of the file and the environment."""

    def __init__(self, path: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.path = path or config_path()
        self.env = dict(os.environ if env is None else env)
        self.file = load_file(self.path)

    def resolve(self, name: str, flag: Any = None) -> Setting:
        key = KEYS[name]
        if flag is not None:
            return Setting(flag, "flag")
        raw = self.env.get(key.env)
        if raw is not None and raw != "":
            try:
                return Setting(key.parse(raw), f"env {key.env}")
            except ConfigError as exc:
                raise ConfigError(f"${key.env}: {exc}") from None
        if name in self.file:
            return Setting(self.file[name], f"config {self.path}")
        default = key.default() if callable(key.default) else key.default
        return Setting(default, "default")

    def all(self) -> dict[str, Setting]:
        return {name: self.resolve(name) for name in KEYS}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    # JSON string escapes are valid TOML basic-string escapes (\", \\, \n, \uXXXX ...).
    return json.dumps(str(value), ensure_ascii=False)


def write_file(values: dict[str, Any], path: Path | None = None) -> Path:
    """Write the flat table atomically (a crash leaves the old file or the new one). The
    user's own lines (comments, blank lines, order) are kept where the file can be edited
    key by key (_edited); `config set` rewrote it whole, and a user's notes were gone."""
    path = path or config_path()
    text = _edited(path, values)
    if text is None:
        lines = ["# mem settings: `mem config show` lists every key and its source."]
        lines += [f"{name} = {_toml_value(values[name])}" for name in KEYS if name in values]
        text = "\n".join(lines) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot write config {path}: {exc.strerror or exc}") from None
    return path


# A key's line: bare, "quoted" or 'literal' (TOML reads all three as the same key).
_KEY_LINE = re.compile(r"""\s*(?:"([A-Za-z0-9_-]+)"|'([A-Za-z0-9_-]+)'|([A-Za-z0-9_-]+))\s*=""")


def _edited(path: Path, values: dict[str, Any]) -> str | None:
    """The file's text with each key's line set to its value (a key not there appended, a
    key not in values dropped), the rest as it was; None when there is no file to edit, or
    when the edit would not read back as values (a key written over several lines)."""
    import tomllib

    try:
        old = path.read_bytes().decode("utf-8")  # not read_text: it turns CRLF into LF
    except (OSError, UnicodeDecodeError):
        return None
    lines, written = [], set()
    for line in old.splitlines():
        m = _KEY_LINE.match(line)
        name = next((g for g in m.groups() if g), None) if m else None
        if name in KEYS:
            if name in values and name not in written:
                # A line whose value stays is kept whole; a new value keeps its comment.
                lines.append(
                    line
                    if _line_value(line, name) == values[name]
                    else f"{name} = {_toml_value(values[name])}{_comment_of(line, name)}"
                )
                written.add(name)
            continue  # unset (or a repeat, which TOML refuses anyway)
        lines.append(line)
    lines += [f"{n} = {_toml_value(values[n])}" for n in KEYS if n in values and n not in written]
    newline = "\r\n" if "\r\n" in old else "\n"
    text = newline.join(lines) + newline
    try:
        if {n: KEYS[n].parse(v) for n, v in tomllib.loads(text).items()} != values:
            return None
    except (tomllib.TOMLDecodeError, ConfigError, KeyError):
        return None
    return text


def _comment_of(line: str, name: str) -> str:
    """The comment at the end of a key's line ("  # why"), or ""."""
    import tomllib

    value = _line_value(line, name)
    for at in (i for i, ch in enumerate(line) if ch == "#"):
        try:
            if KEYS[name].parse(tomllib.loads(line[:at])[name]) == value:
                return "  " + line[at:]
        except (tomllib.TOMLDecodeError, ConfigError, KeyError):
            continue  # a '#' inside the value's string
    return ""


def _line_value(line: str, name: str) -> Any:
    """The value one `key = value` line gives its key (None when it reads as no value)."""
    import tomllib

    try:
        return KEYS[name].parse(tomllib.loads(line)[name])
    except (tomllib.TOMLDecodeError, ConfigError, KeyError):
        return None


def _check_model_file(name: str, value: str) -> None:
    """`config set embedder|reranker`: a built-in embedder name, or a file that is there (a
    mistyped path was accepted, and every recall then failed)."""
    if name == "embedder":
        from memcli.models.load import builtin_name

        if builtin_name(value) is not None:
            return
    if not Path(value).is_file():
        raise ConfigError(
            f"{value!r} is no model file"
            + (" and no built-in embedder (e5, minilm)" if name == "embedder" else "")
        )


def _check_bank(value: str) -> None:
    from memcli.store import StoreError, check_bank_name

    try:
        check_bank_name(value)
    except (StoreError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def value_to_set(name: str, raw: Any) -> Any:
    """parse_value, and for `config set` more: a model is checked to be there and a bank
    name to be one a store takes (the file and the environment are only checked for form
    when read: a model moved later must not stop commands that need none)."""
    value = parse_value(name, raw)
    if name in ("embedder", "reranker"):
        _check_model_file(name, value)
    elif name == "bank":
        _check_bank(value)
    return value


def set_value(name: str, raw: Any, path: Path | None = None) -> Any:
    """Check (value_to_set) and store one key; returns the stored value."""
    path = path or config_path()
    value = value_to_set(name, raw)
    values = load_file(path)
    values[name] = value
    write_file(values, path)
    return value


def unset_value(name: str, path: Path | None = None) -> bool:
    """Remove a key from the file; False when it was not there."""
    if name not in KEYS:
        raise ConfigError(f"unknown key {name!r} (keys: {', '.join(KEYS)})")
    path = path or config_path()
    values = load_file(path)
    if name not in values:
        return False
    del values[name]
    write_file(values, path)
    return True
