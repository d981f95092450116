"""`mem sync`: keep a bank in step with a folder of notes.

Each file the globs match (Markdown or plain text) is a document whose id is its path
relative to the folder (the sync root). A sync compares each file's hash with the one its
document was made from: an unchanged file is skipped unread by the parser, a changed one
replaces its document atomically, a new one is added, and the document of a file that is
gone (deleted, moved, ignored, no longer matched) is forgotten.

What keeps a sync from forgetting what it should not:
- Each document records the root that made it (documents.sync_root, the folder's absolute
  path). A sync forgets and replaces only its own root's documents; a document of the same
  id made otherwise (retained by hand, synced from another folder) is left as it is and the
  file is reported.
- A root that is missing, not a folder or unreadable stops the sync before anything is
  done (an unmounted drive must not forget everything). A root that matches no file at all
  while the bank holds documents from it forgets them only with allow_empty (an empty
  mount point looks like that too).
- A file that cannot be read or parsed keeps its old document; so do the files of a
  subfolder that cannot be listed.
Hidden files and folders (".obsidian", ".trash", ".git") are never read; `.gitignore` and
`.memignore` files (gitignore syntax, each for its folder and below) exclude paths.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memcli.errors import MemError
from memcli.labels import label_problem
from memcli.sources.documents import (
    DocumentsReport,
    SourceDocument,
    file_hash,
    note_items,
    retain_documents,
)
from memcli.sources.markdown import NoteError, parse_note
from memcli.store import Store

DEFAULT_GLOBS = ("**/*.md", "**/*.markdown", "**/*.txt")
IGNORE_FILES = (".gitignore", ".memignore")


class SyncError(MemError, ValueError):
    """A sync that cannot start (one-line message); nothing was changed."""


@dataclass
class Problem:
    path: str
    reason: str

    def line(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class SyncPlan:
    root: Path  # as given
    key: str  # the root's absolute path: its documents' sync_root
    add: list[SourceDocument] = field(default_factory=list)
    replace: list[SourceDocument] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    forget: dict[str, int] = field(default_factory=dict)  # document id -> row
    empty: list[str] = field(default_factory=list)  # files with nothing to retain
    problems: list[Problem] = field(default_factory=list)  # files skipped; old document kept
    matched: int = 0
    # How it was asked for, so that it can be made again (against a store made since).
    globs: list[str] = field(default_factory=list)
    allow_empty: bool = False

    def items(self) -> int:
        return sum(len(d.items) for d in (*self.add, *self.replace))


@dataclass
class SyncReport:
    plan: SyncPlan
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    retained: DocumentsReport | None = None
    interrupted: bool = False

    def line(self) -> str:
        p = self.plan
        parts = [
            f"{len(self.added)} added",
            f"{len(self.replaced)} replaced",
            f"{len(self.forgotten)} forgotten",
            f"{len(p.unchanged)} unchanged",
        ]
        if p.empty:
            parts.append(f"{len(p.empty)} empty")
        if p.problems:
            parts.append(f"{len(p.problems)} skipped")
        facts = self.retained.retained.facts if self.retained else 0
        seconds = self.retained.seconds if self.retained else 0.0
        text = f"synced {p.root}: " + ", ".join(parts) + f" ({facts} facts, {seconds:.1f}s)"
        return ("interrupted: " + text) if self.interrupted else text

    def to_json(self) -> dict[str, Any]:
        p = self.plan
        return {
            "root": p.key,
            "added": self.added,
            "replaced": self.replaced,
            "forgotten": self.forgotten,
            "unchanged": len(p.unchanged),
            "empty": p.empty,
            "skipped": [{"path": x.path, "reason": x.reason} for x in p.problems],
            "facts": self.retained.retained.facts if self.retained else 0,
            "interrupted": self.interrupted,
        }


def plan_json(plan: SyncPlan) -> dict[str, Any]:
    """What a sync would do (--dry-run)."""
    return {
        "root": plan.key,
        "dry_run": True,
        "would_add": [d.document_id for d in plan.add],
        "would_replace": [d.document_id for d in plan.replace],
        "would_forget": sorted(plan.forget),
        "unchanged": len(plan.unchanged),
        "empty": plan.empty,
        "skipped": [{"path": x.path, "reason": x.reason} for x in plan.problems],
    }


# -- reading the folder ---------------------------------------------------------------------


def check_globs(globs: Sequence[str]) -> Any:
    """The globs as one matcher (gitignore's wildmatch: `**/*.md` matches at any depth)."""
    import pathspec

    for g in globs:
        if not g.strip():
            raise SyncError("--glob is empty")
    return pathspec.GitIgnoreSpec.from_lines(list(globs))


def _ignore_spec(folder: Path) -> list[Any]:
    import pathspec

    specs = []
    for name in IGNORE_FILES:
        try:
            lines = (folder / name).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        specs.append(pathspec.GitIgnoreSpec.from_lines(lines))
    return specs


def _ignored(rel: str, specs: list[tuple[str, list[Any]]]) -> bool:
    """Whether a path (relative to the root; a folder's ends in "/") is ignored by the
    ignore files above it: the deepest file with a pattern that matches decides, and its
    last matching pattern (a "!" pattern takes a path back), as git does."""
    for base, folder_specs in reversed(specs):
        inner = rel[len(base) + 1 :] if base else rel
        for spec in reversed(folder_specs):
            result = spec.check_file(inner)
            if result.include is not None:
                return bool(result.include)
    return False


def scan(
    root: Path, globs: Any, skip: Callable[[Path], bool] | None = None
) -> tuple[dict[str, Path], list[str]]:
    """The files under root the globs match and no ignore file excludes: relative path
    (with "/") -> path; and the folders that could not be listed (relative)."""
    files: dict[str, Path] = {}
    unreadable: list[str] = []
    specs_of: dict[str, list[tuple[str, list[Any]]]] = {}

    def on_error(exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else root
        rel = where.relative_to(root).as_posix() if where != root else ""
        unreadable.append(rel)

    for folder, dirnames, filenames in os.walk(root, onerror=on_error):
        here = Path(folder)
        rel_dir = "" if here == root else here.relative_to(root).as_posix()
        parent = rel_dir.rsplit("/", 1)[0] if "/" in rel_dir else ""
        inherited = specs_of.get(parent, []) if rel_dir else []
        own = _ignore_spec(here)
        specs = inherited + [(rel_dir, own)] if own else inherited
        specs_of[rel_dir] = specs
        prefix = f"{rel_dir}/" if rel_dir else ""
        kept_dirs = []
        for name in sorted(dirnames):
            if name.startswith(".") or _ignored(f"{prefix}{name}/", specs):
                continue
            kept_dirs.append(name)
        dirnames[:] = kept_dirs
        for name in filenames:
            rel = prefix + name
            if name.startswith(".") or not globs.match_file(rel) or _ignored(rel, specs):
                continue
            path = here / name
            if skip is not None and skip(path):
                continue
            files[rel] = path
    return files, unreadable


def _root_key(root: Path) -> str:
    return str(root.resolve())


def check_root(root: Path) -> Path:
    """The root as a folder that can be listed, or SyncError (nothing is done then)."""
    if not root.exists():
        raise SyncError(f"{root} does not exist (not mounted?): nothing synced, nothing forgotten")
    if not root.is_dir():
        raise SyncError(
            f"{root} is not a folder: sync takes folders (`mem retain --file` reads one file)"
        )
    try:
        with os.scandir(root) as entries:
            next(entries, None)
    except OSError as exc:
        raise SyncError(
            f"cannot read {root}: {exc.strerror or exc}: nothing synced, nothing forgotten"
        ) from None
    return root


def _mtime(stat: os.stat_result) -> datetime:
    return datetime.fromtimestamp(stat.st_mtime, tz=timezone.utc).replace(tzinfo=None)


def plan_sync(
    store: Store | None,
    bank: str,
    root: Path,
    globs: Sequence[str] = DEFAULT_GLOBS,
    *,
    skip: Callable[[Path], bool] | None = None,
    allow_empty: bool = False,
) -> SyncPlan:
    """What a sync of root would do; reads and hashes every matched file and parses the
    new and changed ones. Writes nothing. SyncError when the root cannot be synced. store
    None: no store yet (every file is new)."""
    from memcli.retain import RetainError, check_item

    matcher = check_globs(globs)
    check_root(root)
    key = _root_key(root)
    plan = SyncPlan(root=root, key=key, globs=list(globs), allow_empty=allow_empty)
    files, unreadable = scan(Path(key), matcher, skip)
    plan.matched = len(files)
    bank_id = store.banks.bank_id(bank) if store is not None else None
    ours, live = {}, {}
    if store is not None and bank_id is not None:
        ours = store.sources.synced_documents(bank_id, key)
        live = store.sources.document_sources(bank_id, list(files)) if files else {}
    for rel in sorted(files):
        path = files[rel]
        problem = label_problem(rel)
        if problem:
            plan.problems.append(Problem(rel, f"the path {problem}"))
            continue
        doc = live.get(rel)
        if doc is not None and doc.sync_root != key:
            made = f"synced from {doc.sync_root}" if doc.sync_root else "retained otherwise"
            plan.problems.append(
                Problem(rel, f"document {rel!r} was {made}, not by syncing {key}: left as it is")
            )
            continue
        try:
            data = path.read_bytes()
            stat = path.stat()
        except OSError as exc:
            plan.problems.append(Problem(rel, f"cannot read it: {exc.strerror or exc}"))
            continue
        source_hash = file_hash(data)
        if doc is not None and doc.source_hash == source_hash:
            plan.unchanged.append(rel)
            continue
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            plan.problems.append(Problem(rel, f"not UTF-8 text (bad byte at offset {exc.start})"))
            continue
        try:
            note = parse_note(text, path.name, path.stem)
            items = note_items(note, document_id=rel, source_id=rel, said_at=_mtime(stat))
            for item in items:
                check_item(item)
        except (NoteError, RetainError) as exc:
            plan.problems.append(Problem(rel, str(exc)))
            continue
        if not items:
            if doc is not None:  # emptied: its old content is no longer in the file
                plan.forget[rel] = doc.row
            else:
                plan.empty.append(rel)
            continue
        (plan.replace if doc is not None else plan.add).append(
            SourceDocument(rel, source_hash, items, label=rel)
        )
    for rel, doc in ours.items():
        if rel in files:
            continue
        if any(not d or rel == d or rel.startswith(d + "/") for d in unreadable):
            plan.problems.append(Problem(rel, "its folder could not be read: document kept"))
            continue
        plan.forget[rel] = doc.row
    if not files and plan.forget and not allow_empty:
        raise SyncError(
            f"{root} holds no file to sync but {len(plan.forget)} documents were synced from "
            "it (an empty mount point?): nothing forgotten; to forget them all, give "
            "--allow-empty"
        )
    return plan


def run_sync(
    store: Store,
    bank: str,
    plan: SyncPlan,
    embedder: Callable[[], Any],
    *,
    progress: Callable[[int], None] | None = None,
    now: datetime | None = None,
) -> SyncReport:
    """Carry out a plan: forget the documents of files that are gone (one transaction),
    then retain the new and changed files' documents in groups (documents.py)."""
    report = SyncReport(plan=plan)
    if plan.forget:
        bank_id = store.banks.bank_id(bank)
        if bank_id is not None:
            with store.atomic():
                rows = {row: rel for rel, row in plan.forget.items()}
                store.sources.forget_documents(bank_id, list(rows), plan.key)
            report.forgotten = sorted(plan.forget)
    docs = [*plan.add, *plan.replace]
    if docs:
        retained = retain_documents(
            store, bank, docs, embedder, sync_root=plan.key, now=now, progress=progress
        )
        report.retained = retained
        report.added = retained.added
        report.replaced = retained.replaced
        report.interrupted = retained.interrupted
    return report


# -- watching -----------------------------------------------------------------------------


def watch_changes(
    roots: Sequence[Path], store_path: Path, stop_event: Any = None
) -> Iterator[set[Path]]:
    """The paths that changed under the roots, a set per burst of changes (watchfiles
    groups the events of a burst: an editor's save is several). The first set, empty or
    not, comes once the watcher is live: a change made before it (during a first sync) is
    caught by syncing again then. Changes to the store's own files and to hidden paths
    (other than ignore files) are not reported. Ctrl-C raises KeyboardInterrupt."""
    import watchfiles

    store = store_path.resolve()
    own = {str(store), *(f"{store}{end}" for end in ("-wal", "-shm", "-journal"))}
    bases = [Path(r) for r in roots]

    def hidden(path: str) -> bool:
        """Whether a path is one a sync never reads (a hidden file or folder under a root,
        such as .obsidian/workspace.json or the store's own staging files)."""
        here = Path(path)
        for base in bases:
            if here == base or base in here.parents:
                parts = here.relative_to(base).parts
                if parts and parts[-1] in IGNORE_FILES:
                    parts = parts[:-1]
                return any(part.startswith(".") for part in parts)
        return False

    class Filter(watchfiles.DefaultFilter):
        def __call__(self, change: Any, path: str) -> bool:
            return path not in own and super().__call__(change, path) and not hidden(path)

    ready = False
    for changes in watchfiles.watch(
        *[str(r) for r in roots],
        watch_filter=Filter(),
        stop_event=stop_event,
        # Wakes every quarter second when idle: the first wake says the watcher is live.
        rust_timeout=250,
        yield_on_timeout=True,
    ):
        if not changes and ready:
            continue
        ready = True
        yield {Path(p) for _, p in changes}
