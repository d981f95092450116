"""The `mem` command's first code (the console script and `python -m memcli`). Ctrl-C while
the CLI's modules load (typer, click, rich: the first ~50 ms) ends as every other Ctrl-C
does, "mem: interrupted" and exit 130: it printed a traceback through the imports, as the
CLI's own handler (memcli/cli.py) was not installed yet."""

from __future__ import annotations

import os
import sys


def main() -> None:
    try:
        from memcli.cli import main as cli_main

        cli_main()  # ends the process itself (exit_now)
    except KeyboardInterrupt:
        try:
            sys.stderr.write("mem: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):  # a closed or missing stderr
            pass
        os._exit(130)
