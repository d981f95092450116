"""Store locations: a path, or a postgresql:// URL; telling them apart, checking a URL and
showing one without its password. Light (the standard library only): the CLI and the config
use it at start-up, before anything under memcli.store (numpy, SQLite) is imported.
memcli/store/location.py opens the store a location names."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SCHEMES = ("postgresql://", "postgres://")
# A value that looks like a URL of any scheme ("mysql://...", "postgresql:/x"): never a path.
_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")
# Query parameters whose values are secrets (libpq's connection parameters).
_SECRET_PARAMS = {"password", "sslpassword"}
EXTRA_HINT = "pip install 'memcli[postgres]'"


def is_postgres_url(value: str | os.PathLike | None) -> bool:
    return isinstance(value, str) and value.lower().startswith(SCHEMES)


def looks_like_url(value: str | os.PathLike | None) -> bool:
    """Whether a store location is a URL (of any scheme), not a path."""
    return isinstance(value, str) and _URL_LIKE.match(value) is not None


def masked(url: str) -> str:
    """The URL with its password (in the user part or as a parameter) shown as ***."""
    if "//" not in url:  # "postgresql:/u:pw@h/db": no URL to parse, still no password shown
        return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*:/*[^:/@]*:)[^@/]*@", r"\1***@", url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r"(//[^:/@]*:)[^@]*@", r"\1***@", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        if ":" in userinfo:
            user, _, _ = userinfo.partition(":")
            netloc = f"{user}:***@{hosts}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in _SECRET_PARAMS for k, _ in pairs):
            query = urlencode(
                [(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in pairs], safe="/*"
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub(text: str, url: str) -> str:
    """text with the URL's password (if it appears, as given or percent-decoded) masked."""
    from urllib.parse import unquote

    secrets: set[str] = set()
    try:
        parts = urlsplit(url)
        if parts.password:
            secrets.update({parts.password, unquote(parts.password)})
        for k, v in parse_qsl(parts.query, keep_blank_values=True):
            if k.lower() in _SECRET_PARAMS and v:
                secrets.add(v)
    except ValueError:
        pass
    text = text.replace(url, masked(url))
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 1:
            text = text.replace(secret, "***")
    return text


def url_problem(url: str) -> str | None:
    """What is wrong with a postgresql:// URL as a store location, or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        return f"{masked(url)} is not a valid postgresql:// URL: {exc}"
    database = parts.path.lstrip("/")
    if not database and not any(k == "dbname" for k, _ in parse_qsl(parts.query)):
        return f"{masked(url)} names no database: postgresql://user@host:port/DBNAME"
    return None


def location_problem(location: str | os.PathLike) -> str | None:
    """What is wrong with a store location, or None: a URL of another scheme is never taken
    for a path (it made a folder named 'mysql:' holding a SQLite store)."""
    if is_postgres_url(location):
        return url_problem(str(location))
    if looks_like_url(location):
        return (
            f"{masked(str(location))} is not a store location mem knows: give a file path or a "
            "postgresql:// URL"
        )
    return None


def shown(location: str | os.PathLike) -> str:
    """The location as output may show it (a URL without its password)."""
    return masked(str(location)) if is_postgres_url(location) else str(location)


class StoreURL(str):
    """A postgresql:// store location where the CLI keeps a path (state.db): the few
    questions asked of a path have answers here, so the commands need no second branch.
    str() is the URL itself (with any password: pass it to open_store, never print it;
    shown() is for output)."""

    def expanduser(self) -> StoreURL:
        return self

    def resolve(self) -> StoreURL:
        return self

    def absolute(self) -> StoreURL:
        return self

    def __repr__(self) -> str:
        return f"StoreURL({masked(str(self))!r})"


def location_of(raw: str | os.PathLike) -> Any:
    """A configured store location: StoreURL for a postgresql:// URL, else a Path (~ expanded)."""
    if is_postgres_url(raw):
        return StoreURL(str(raw))
    return Path(raw).expanduser()
