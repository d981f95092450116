"""`mem config path|show|set|unset`: the settings file (memcli/config.py does the work)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from memcli.cliutil import FormatTextJson, JsonFlag, fail, info, wants_json

config_app = typer.Typer(
    name="config",
    help="Show or change mem's settings file (TOML). Precedence: flag > MEM_* env > file > "
    "default.\n\nExample:  mem config set max_tokens 2000",
    no_args_is_help=True,
)


def _keys_help() -> str:
    from memcli.config import KEYS

    return ", ".join(KEYS)


@config_app.command("path")
def path() -> None:
    """Print where the settings file is (or would be): $MEM_CONFIG, else the user config dir.

    Example:  mem config path
    """
    from memcli.config import config_path

    typer.echo(str(config_path()))


@config_app.command("show")
def show(
    output: FormatTextJson = None,
    as_json: JsonFlag = False,
) -> None:
    """Show every setting, its value and where it comes from (flag, env, config, default).

    Example:  MEM_BUDGET=high mem config show
    """
    as_json = wants_json(as_json, output)
    from memcli.cliutil import state
    from memcli.config import KEYS, ConfigError, Settings
    from memcli.storeurl import shown

    try:
        settings = Settings()
        resolved = {k: settings.resolve(k, state.flags.get(k)) for k in KEYS}
    except ConfigError as exc:
        fail(str(exc))
    if resolved["db"].value is not None:  # a URL's password is never shown
        resolved["db"] = type(resolved["db"])(shown(resolved["db"].value), resolved["db"].source)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "path": str(settings.path),
                    "settings": {
                        k: {"value": s.value, "source": s.source, "env": KEYS[k].env}
                        for k, s in resolved.items()
                    },
                },
                ensure_ascii=False,
            )
        )
        return
    typer.echo(f"# {settings.path}" + ("" if settings.path.exists() else " (not created yet)"))
    width = max(len(k) for k in resolved)
    for name, setting in resolved.items():
        value = "(none)" if setting.value is None else setting.value
        typer.echo(f"{name:<{width}} = {value}    # {setting.source}")


@config_app.command("set")
def set_(
    key: Annotated[
        str,
        typer.Argument(
            metavar="KEY",
            help="db, bank, budget, max_tokens, format, embedder, reranker, threads, "
            "forget_limit or mcp_token_file.",
        ),
    ],
    value: Annotated[str, typer.Argument(metavar="VALUE", help="The new value.")],
) -> None:
    """Set KEY to VALUE in the settings file (checked first: a bad value changes nothing).

    Example:  mem config set budget high
    """
    from memcli.config import ConfigError, set_value, value_to_set

    try:
        checked = value_to_set(key, value)
    except ConfigError as exc:
        fail(str(exc), 2)  # a bad KEY or VALUE is a usage error
    if key == "embedder":
        from memcli.cliutil import refuse_embedder_at_odds

        refuse_embedder_at_odds(checked)
    try:
        stored = set_value(key, value)
    except ConfigError as exc:
        fail(str(exc))
    from memcli.storeurl import shown

    info(f"{key} = {shown(stored) if key == 'db' else stored}")


@config_app.command("unset")
def unset(
    key: Annotated[str, typer.Argument(metavar="KEY", help="The key to remove.")],
) -> None:
    """Remove KEY from the settings file (it falls back to env or the default).

    Example:  mem config unset reranker
    """
    from memcli.config import ConfigError, unset_value

    try:
        removed = unset_value(key)
    except ConfigError as exc:
        fail(str(exc), 2 if "unknown key" in str(exc) else 1)
    info(f"{key} removed" if removed else f"{key} was not set")


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
