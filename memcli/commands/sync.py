"""`mem sync`: keep the bank in step with folders of notes (the Memory plans and carries out
each sync, memcli/sources/sync.py; this parses, prints and watches)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from memcli.cliutil import errors, exit_interrupted, fail, fail_error, state


def _say(message: str) -> None:
    """A message or a summary (stderr: stdout is for results)."""
    typer.echo(message, err=True)


def sync(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Folders to keep the bank in step with.", show_default=False),
    ],
    glob: Annotated[
        list[str] | None,
        typer.Option(
            "--glob",
            help="Which files (repeatable, gitignore-style wildcards, relative to each "
            "folder). Default: **/*.md, **/*.markdown and **/*.txt.",
        ),
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", help="Then follow changes until Ctrl-C.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print what would be added, replaced and forgotten."),
    ] = False,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty",
            help="Let a folder with no matching file forget every document synced from it.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print each folder's result as a JSON line.")
    ] = False,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            metavar="NAME|PATH",
            help="Embedding model for a new bank: e5, minilm or a GGUF path.",
        ),
    ] = None,
) -> None:
    """Keep the bank in step with folders of notes (Markdown and text files).

    A file's path inside its folder is its document: a new file is added, a changed one
    replaces its document, an unchanged one is skipped, and the document of a file that
    is gone is forgotten (never when the folder is missing or unreadable). Hidden files,
    .gitignore and .memignore are honoured.

    Example:  mem sync ~/notes --glob '**/*.md' --dry-run
    """
    if watch and dry_run:
        fail("--watch and --dry-run do not go together", 2)
    from memcli.sources.sync import DEFAULT_GLOBS, SyncError, check_globs

    globs = list(glob or DEFAULT_GLOBS)
    try:
        check_globs(globs)
    except SyncError as exc:
        fail_error(exc, renames={"globs": "--glob"})
    runner = _Runner(globs, allow_empty, as_json, embedder)
    if dry_run:
        runner.dry_run(paths)
        return
    code = runner.sync_all(paths)
    if not watch:
        runner.close()
        if runner.interrupted:
            exit_interrupted()
        if code:
            raise typer.Exit(code)
        return
    runner.watch(paths)


class _Runner:
    """One `mem sync` run: one Memory (its store and embedder, opened once and kept while
    it watches)."""

    def __init__(
        self, globs: list[str], allow_empty: bool, as_json: bool, embedder: str | None
    ) -> None:
        from memcli.cliutil import memory as cli_memory

        self.globs = globs
        self.allow_empty = allow_empty
        self.as_json = as_json
        self.memory = cli_memory(embedder)
        self.interrupted = False

    def close(self) -> None:
        self.memory.close()

    def dry_run(self, roots: list[Path]) -> None:
        from memcli import render
        from memcli.sources.sync import plan_json

        plans = []
        with errors():
            for root in roots:  # every folder checked before the first is planned
                from memcli.sources.sync import check_root

                check_root(root)
            for root in roots:
                plans.append(self.memory.plan_sync(root, self.globs, allow_empty=self.allow_empty))
        self.close()
        for root, plan in zip(roots, plans):
            if self.as_json:
                typer.echo(render.dumps(plan_json(plan)))
            else:
                for doc in plan.add:
                    typer.echo(f"add      {doc.document_id}")
                for doc in plan.replace:
                    typer.echo(f"replace  {doc.document_id}")
                for rel in sorted(plan.forget):
                    typer.echo(f"forget   {rel}")
            for problem in plan.problems:
                _say(f"mem: warning: skipped {problem.line()}")
            _say(
                f"dry run of {root}: would add {len(plan.add)}, replace "
                f"{len(plan.replace)}, forget {len(plan.forget)}; {len(plan.unchanged)} "
                "unchanged"
            )

    def sync_all(self, roots: list[Path], watching: bool = False, quiet: bool = False) -> int:
        """Sync each root; returns 1 when a root failed or a file was skipped, else 0.
        quiet: say nothing of a root where nothing changed."""
        from memcli.errors import MemError
        from memcli.sources.sync import check_root

        if not watching:
            with errors():
                for root in roots:  # before a store is made or anything forgotten
                    check_root(root)
        code = 0
        for root in roots:
            if self.interrupted:
                break
            try:
                code |= self._sync_one(root, quiet)
            except MemError as exc:
                if not watching:
                    self.close()
                    fail_error(exc)
                _say(f"mem: error: {exc}")
                code = 1
        return code

    def _sync_one(self, root: Path, quiet: bool = False) -> int:
        from memcli import progress as progress_mod
        from memcli import render

        plan = self.memory.plan_sync(root, self.globs, allow_empty=self.allow_empty)
        if quiet and not (plan.add or plan.replace or plan.forget or plan.problems):
            return 0
        for problem in plan.problems:
            _say(f"mem: warning: skipped {problem.line()}")
        # The bar is closed before an error is printed, so the message has its own line.
        with progress_mod.bar(plan.items(), f"syncing {root}") as advance:
            report = self.memory.sync(plan, progress=advance)
        if self.as_json:
            typer.echo(render.dumps(report.to_json()))
        _say(report.line())
        if report.interrupted:
            self.interrupted = True
        return 1 if report.plan.problems else 0

    def watch(self, roots: list[Path]) -> None:
        from memcli.sources.sync import watch_changes

        keys = [(root, root.resolve()) for root in roots]
        live = False
        try:
            for changed in watch_changes([k for _, k in keys], Path(state.db).expanduser()):
                if not live:
                    # The watcher is live: what changed during the first sync is synced now.
                    live = True
                    self.sync_all(roots, watching=True, quiet=True)
                    _say(f"watching {', '.join(map(str, roots))} for changes (Ctrl-C to stop)")
                affected = [
                    root
                    for root, key in keys
                    if any(path == key or key in path.parents for path in changed)
                ]
                self.sync_all(affected, watching=True)
                sys.stderr.flush()
                if self.interrupted:
                    self.close()
                    exit_interrupted()
        except KeyboardInterrupt:
            self.close()
            _say("stopped watching")
            raise typer.Exit(0) from None
        self.close()


def register(app: typer.Typer) -> None:
    app.command("sync")(sync)
