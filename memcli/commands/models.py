"""`mem models` (which models are active and where from) and `mem models add PATH --as ROLE`
(check a GGUF and record it in the config file). The work is in memcli/modelcheck.py."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from memcli.cliutil import configured, fail, info, state

models_app = typer.Typer(
    name="models",
    help="Show the active embedder and reranker, or add a GGUF model.\n\n"
    "Example:  mem models add ~/models/bge-reranker.gguf --as reranker",
    invoke_without_command=True,
)


class Role(str, Enum):
    embedder = "embedder"
    reranker = "reranker"


@models_app.callback()
def models(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show which embedder and reranker are active, and where each comes from (flag, env,
    config, the bank's record, default); and the built-in embedders.

    Example:  mem --bank work models
    """
    if ctx.invoked_subcommand is not None:
        return
    from memcli import modelcheck

    override = configured("embedder")
    embedder_source = state.sources["embedder"].source
    reranker = configured("reranker")
    reranker_source = state.sources["reranker"].source
    from memcli.cliutil import errors
    from memcli.cliutil import memory as cli_memory

    with errors():
        active = cli_memory().active_embedder()
    obj = {
        "bank": state.bank,
        "embedder": {**active, "setting": override, "setting_source": embedder_source},
        "reranker": {"path": reranker, "source": reranker_source},
        "builtin_embedders": modelcheck.builtin_embedders(),
    }
    if as_json:
        typer.echo(json.dumps(obj, ensure_ascii=False))
        return
    typer.echo(f"embedder  {active['spec']}  ({active['reason']}; setting: {embedder_source})")
    if reranker:
        typer.echo(f"reranker  {reranker}  ({reranker_source})")
    else:
        typer.echo("reranker  none: recall uses fusion order (mem models add PATH --as reranker)")
    for b in obj["builtin_embedders"]:
        aliases = f" ({', '.join(b['aliases'])})" if b["aliases"] else ""
        where = b["converted"] or "converted on first use"
        typer.echo(f"built-in  {b['name']}{aliases}: {where}")


@models_app.command("add")
def add(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="A GGUF model file.")],
    role: Annotated[
        Role, typer.Option("--as", help="What it is for: embedder or reranker.", show_default=False)
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print what was read as JSON.")] = False,
) -> None:
    """Check a GGUF model (architecture, pooling type, classifier head) and record it in the
    config file as the embedder or the reranker. Nothing is recorded when the check fails.

    Example:  mem models add ~/models/ms-marco-MiniLM-L6.gguf --as reranker
    """
    from memcli import modelcheck
    from memcli.config import ConfigError, set_value
    from memcli.models import ModelError

    path = path.expanduser().resolve()
    try:
        checked = modelcheck.check_for_role(path, role.value)
    except ModelError as exc:
        fail(str(exc))
    try:
        set_value(role.value, str(path))
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps({"role": role.value, **checked.to_json()}, ensure_ascii=False))
    info(
        f"{role.value} = {path} ({checked.architecture}, {checked.pooling_name} pooling"
        + (f", {checked.embedding_length} dims" if role is Role.embedder else "")
        + ") recorded in the config file"
    )
    if role is Role.embedder:
        info(
            "banks made with another model refuse it: `mem reembed` moves a bank to it, "
            "`mem config unset embedder` goes back"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
