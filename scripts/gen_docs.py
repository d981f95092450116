"""Generate shell completions (bash, zsh, fish) and the man page from the `mem` CLI itself.

    python scripts/gen_docs.py           # write completions/ and man/mem.1
    python scripts/gen_docs.py --check   # exit 1, naming the stale files, when they differ

Everything comes from the typer app's command tree (names, options, choices, help texts and
examples), so a new command or option appears in all four files when this is run again;
tests/test_docs.py runs --check. The output is deterministic: no dates, paths or terminal
widths from the machine that ran it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUTPUTS = {
    "bash": ROOT / "completions" / "mem.bash",
    "zsh": ROOT / "completions" / "_mem",
    "fish": ROOT / "completions" / "mem.fish",
    "man": ROOT / "man" / "mem.1",
}


# --------------------------------------------------------------------------------------------
# the command tree


def _checked_values() -> dict[str, tuple[str, ...]]:
    from memcli.store import FACT_TYPES

    return {"--type": FACT_TYPES}


CHECKED_VALUES = _checked_values()


@dataclass
class Opt:
    names: list[str]  # --long, -s, and --no-x secondaries
    takes_value: bool
    value_name: str
    choices: list[str]
    is_path: bool
    help: str


@dataclass
class Arg:
    name: str
    value_name: str
    many: bool
    required: bool
    help: str
    is_path: bool


@dataclass
class Command:
    path: list[str]  # [] for mem itself
    summary: str
    help: str
    epilog: str
    options: list[Opt] = field(default_factory=list)
    arguments: list[Arg] = field(default_factory=list)
    subcommands: list[Command] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " ".join(["mem", *self.path])


def _choice_values(desc: Any, names: list[str]) -> list[str]:
    if not desc.is_choice or not desc.choices:
        # Options whose values mem checks itself (a free value to typer: `--type` is
        # repeatable for recall, and its message names the types).
        return list(CHECKED_VALUES.get(names[0], ())) if names else []
    return [c.value if isinstance(c, Enum) else str(c) for c in desc.choices]


def _clean(text: str | None) -> str:
    """Help text as written in the docstring, without typer's markup or \\b markers."""
    if not text:
        return ""
    lines = [line.rstrip() for line in text.replace("\b", "").strip().splitlines()]
    out: list[str] = []
    for line in lines:
        out.append(line.strip())
    return "\n".join(out).strip()


def _summary(help_text: str) -> str:
    first = help_text.split("\n\n")[0].replace("\n", " ").strip()
    return first


def _cut(text: str, width: int) -> str:
    """At most width characters, cut at a word's end with "..." (not inside a word)."""
    if len(text) <= width:
        return text
    head = text[: width - 3]
    space = head.rfind(" ")
    return (head[:space] if space > width // 2 else head).rstrip(" ,;:") + "..."


def read_tree() -> Command:
    import typer.main

    from memcli.cli import app

    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="mem")

    def build(cmd: Any, path: list[str]) -> Command:
        help_text = _clean(cmd.help)
        node = Command(path, _summary(help_text), help_text, _clean(cmd.epilog))
        for p in cmd.params:
            if getattr(p, "hidden", False):
                continue
            desc = p.type_descriptor
            value = p.display_type(ctx) or ""
            if p.metavar:
                value = p.metavar
            # A path, a file, or a name-or-path value: complete file names.
            is_path = (
                bool(desc.is_path or desc.is_file)
                or any(w in ("PATH", "FILE", "DIR") for w in value.replace("|", " ").split())
                or p.name in ("file", "files", "path", "paths")
            )
            if p.param_type_name == "argument":
                node.arguments.append(
                    Arg(
                        p.name,
                        (p.metavar or p.name).upper(),
                        p.nargs != 1,
                        bool(p.required),
                        _clean(p.help),
                        is_path,
                    )
                )
                continue
            flag = bool(getattr(p, "is_flag", False))
            node.options.append(
                Opt(
                    [*p.opts, *p.secondary_opts],
                    not flag,
                    value,
                    _choice_values(desc, list(p.opts)),
                    is_path,
                    _clean(p.help).replace("\n", " "),
                )
            )
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                node.subcommands.append(build(cmd.get_command(ctx, name), [*path, name]))
        return node

    return build(root, [])


def walk(node: Command) -> list[Command]:
    out = [node]
    for sub in node.subcommands:
        out += walk(sub)
    return out


# --------------------------------------------------------------------------------------------
# bash


def gen_bash(tree: Command) -> str:
    """Completes subcommands, options, choice values and file names, from a static table."""
    lines = [
        "# bash completion for mem. Generated by scripts/gen_docs.py; do not edit.",
        "# Install: source it from ~/.bashrc, or copy it to",
        "# ~/.local/share/bash-completion/completions/mem",
        "",
        "_mem() {",
        "    local cur prev words cword",
        "    COMPREPLY=()",
        '    cur="${COMP_WORDS[COMP_CWORD]}"',
        '    prev="${COMP_WORDS[COMP_CWORD-1]}"',
        "    # The command path: the words before the cursor that name (sub)commands.",
        '    local path="" w i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        w="${COMP_WORDS[i]}"',
        '        case "$path:$w" in',
    ]
    groups = [n for n in walk(tree) if n.subcommands]
    for group in groups:
        key = " ".join(group.path)
        for sub in group.subcommands:
            lines.append(f'            "{key}:{sub.path[-1]}") path="{" ".join(sub.path)}" ;;')
    lines += [
        "        esac",
        "    done",
        '    local opts="" subs="" files="" choices=""',
        '    case "$path" in',
    ]
    for node in walk(tree):
        key = " ".join(node.path)
        opts = " ".join(n for o in node.options for n in o.names)
        subs = " ".join(s.path[-1] for s in node.subcommands)
        lines.append(f'        "{key}")')
        lines.append(f'            opts="{opts}"')
        if subs:
            lines.append(f'            subs="{subs}"')
        cases = []
        for o in node.options:
            if not o.takes_value:
                continue
            pattern = "|".join(o.names)
            if o.choices:
                cases.append(f'                {pattern}) choices="{" ".join(o.choices)}" ;;')
            elif o.is_path:
                cases.append(f"                {pattern}) files=1 ;;")
            else:
                cases.append(f"                {pattern}) choices=__value__ ;;")
        if cases:
            lines.append('            case "$prev" in')
            lines += cases
            lines.append("            esac")
        if any(a.is_path for a in node.arguments):
            lines.append('            [[ -z "$choices" ]] && files=${files:-args}')
        lines.append("            ;;")
    lines += [
        "    esac",
        '    if [[ "$choices" == __value__ ]]; then',
        "        COMPREPLY=()",
        "        return",
        "    fi",
        '    if [[ -n "$choices" ]]; then',
        '        COMPREPLY=($(compgen -W "$choices" -- "$cur"))',
        "        return",
        "    fi",
        '    if [[ "$files" == 1 ]]; then',
        '        COMPREPLY=($(compgen -f -- "$cur"))',
        "        return",
        "    fi",
        '    if [[ "$cur" == -* ]]; then',
        '        COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
        '    elif [[ -n "$subs" ]]; then',
        '        COMPREPLY=($(compgen -W "$subs" -- "$cur"))',
        '    elif [[ "$files" == args ]]; then',
        '        COMPREPLY=($(compgen -f -- "$cur"))',
        "    fi",
        "}",
        "complete -o default -F _mem mem",
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# zsh


def _zsh_escape(text: str) -> str:
    return (
        text.replace("\\", "\\\\")
        .replace("'", "'\\''")
        .replace("[", "\\[")
        .replace("]", "\\]")
        .replace(":", "\\:")
    )


def _zsh_func(node: Command) -> str:
    return "_mem" + "".join("_" + p.replace("-", "_") for p in node.path)


def gen_zsh(tree: Command) -> str:
    lines = [
        "#compdef mem",
        "# zsh completion for mem. Generated by scripts/gen_docs.py; do not edit.",
        "# Install: put this file (named _mem) in a folder on $fpath, e.g. ~/.zfunc with",
        "# fpath=(~/.zfunc $fpath) before compinit in ~/.zshrc.",
        "",
    ]
    for node in walk(tree):
        lines.append(f"{_zsh_func(node)}() {{")
        specs = []
        for o in node.options:
            desc = _zsh_escape(_cut(_summary(o.help), 120))
            names = o.names
            exclusive = "(" + " ".join(names) + ")" if len(names) > 1 else ""
            target = "{" + ",".join(names) + "}" if len(names) > 1 else names[0]
            if not o.takes_value:
                action = ""
            elif o.choices:
                action = f":{o.value_name.lower() or 'value'}:({' '.join(o.choices)})"
            elif o.is_path:
                action = f":{o.value_name.lower() or 'file'}:_files"
            else:
                action = f":{(o.value_name or 'value').lower()}: "
            if len(names) > 1:
                specs.append(f"'{exclusive}'{target}'[{desc}]{action}'")
            else:
                specs.append(f"'{target}[{desc}]{action}'")
        if node.subcommands:
            specs.append("'1: :->command'")
            specs.append("'*:: :->args'")
        else:
            for a in node.arguments:
                action = "_files" if a.is_path else " "
                desc = _zsh_escape(a.value_name.lower())
                specs.append(f"'{'*' if a.many else ''}:{desc}:{action}'")
        lines.append("    local state line")
        lines.append("    _arguments -s -S \\")
        for spec in specs:
            lines.append(f"        {spec} \\")
        lines[-1] = lines[-1][:-2]
        if node.subcommands:
            lines.append("    case $state in")
            lines.append("        command)")
            lines.append("            local -a commands")
            lines.append("            commands=(")
            for sub in node.subcommands:
                lines.append(
                    f"                '{sub.path[-1]}:{_zsh_escape(_cut(sub.summary, 100))}'"
                )
            lines.append("            )")
            lines.append("            _describe -t commands 'mem command' commands")
            lines.append("            ;;")
            lines.append("        args)")
            lines.append("            case $line[1] in")
            for sub in node.subcommands:
                lines.append(f"                {sub.path[-1]}) {_zsh_func(sub)} ;;")
            lines.append("            esac")
            lines.append("            ;;")
            lines.append("    esac")
        lines.append("}")
        lines.append("")
    lines.append('_mem "$@"')
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# fish


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def gen_fish(tree: Command) -> str:
    lines = [
        "# fish completion for mem. Generated by scripts/gen_docs.py; do not edit.",
        "# Install: copy to ~/.config/fish/completions/mem.fish",
        "",
        "# True when the command line names exactly this (sub)command path so far.",
        "function __mem_path",
        "    set -l want $argv",
        "    set -l words (commandline -opc)",
        "    set -e words[1]",
        "    set -l got",
        "    for w in $words",
        "        switch $w",
        "            case '-*'",
        "                continue",
        "        end",
        "        set -l try $got $w",
        "        if contains -- (string join ' ' $try) $__mem_commands",
        "            set got $try",
        "        end",
        "    end",
        "    set -l a (string join ' ' $got)",
        "    set -l b (string join ' ' $want)",
        '    test "$a" = "$b"',
        "end",
        "",
    ]
    all_paths = [" ".join(n.path) for n in walk(tree) if n.path]
    lines.append("set -g __mem_commands " + " ".join(_fish_quote(p) for p in all_paths))
    lines.append("complete -c mem -f")
    for node in walk(tree):
        cond = "__mem_path" + "".join(" " + p for p in node.path)
        for sub in node.subcommands:
            lines.append(
                f"complete -c mem -n {_fish_quote(cond)} -a {sub.path[-1]} "
                f"-d {_fish_quote(_cut(sub.summary, 100))}"
            )
        for o in node.options:
            parts = [f"complete -c mem -n {_fish_quote(cond)}"]
            for name in o.names:
                if name.startswith("--"):
                    parts.append(f"-l {name[2:]}")
                else:
                    parts.append(f"-s {name[1:]}")
            if o.takes_value:
                if o.choices:
                    parts.append(f"-x -a {_fish_quote(' '.join(o.choices))}")
                elif o.is_path:
                    parts.append("-r -F")
                else:
                    parts.append("-x")
            parts.append(f"-d {_fish_quote(_cut(_summary(o.help), 100))}")
            lines.append(" ".join(parts))
        if not node.subcommands and any(a.is_path for a in node.arguments):
            lines.append(f"complete -c mem -n {_fish_quote(cond)} -F")
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# man page


def _roff(text: str) -> str:
    """Escape text for roff: backslashes, leading dots and quotes, and hyphens in options."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    out = []
    for line in text.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if p.strip()]


def _example_lines(text: str) -> list[str]:
    """Example blocks ("Example:  mem ...") as literal lines."""
    out = []
    for para in _paragraphs(text):
        body = para.removeprefix("Example:").strip()
        out += [line.strip() for line in body.splitlines() if line.strip()]
    return out


def _synopsis(node: Command) -> str:
    parts = [f"\\fB{_roff(node.name)}\\fR"]
    if node.options:
        parts.append("[\\fIOPTIONS\\fR]")
    if node.subcommands:
        parts.append("\\fICOMMAND\\fR")
    for a in node.arguments:
        word = f"\\fI{_roff(a.value_name)}\\fR" + ("..." if a.many else "")
        parts.append(word if a.required else f"[{word}]")
    return " ".join(parts)


def _man_options(node: Command) -> list[str]:
    lines = []
    for o in node.options:
        names = ", ".join(f"\\fB{_roff(n)}\\fR" for n in o.names)
        if o.takes_value:
            value = "|".join(o.choices) if o.choices else (o.value_name or "VALUE")
            names += f" \\fI{_roff(value)}\\fR"
        lines += [".TP", names, _roff(o.help) or "\\&"]
    return lines


def gen_man(tree: Command) -> str:
    from memcli import __version__
    from memcli.config import KEYS

    lines = [
        '.\\" Generated by scripts/gen_docs.py from the mem CLI; do not edit.',
        f'.TH MEM 1 "" "mem {__version__}" "User Commands"',
        ".SH NAME",
        "mem \\- " + _roff(tree.summary[0].lower() + tree.summary[1:]),
        ".SH SYNOPSIS",
        _synopsis(tree),
        ".SH DESCRIPTION",
        _roff(
            "mem keeps memories in one SQLite file (FTS5 and sqlite-vec) and gives back the "
            "best ones for a query, ranked by four retrieval arms (semantic, keyword, graph, "
            "temporal), fused, optionally reranked, and sized to a token budget for a "
            "language model's context. Models run locally through llama.cpp; nothing is "
            "downloaded at run time."
        ),
        ".SH GLOBAL OPTIONS",
        *_man_options(tree),
        ".SH COMMANDS",
    ]
    for node in walk(tree)[1:]:
        lines.append(f".SS {_roff(node.name)}")
        lines.append(_synopsis(node))
        lines.append(".PP")
        body = [p for p in _paragraphs(node.help) if not p.startswith("Example")]
        examples = _example_lines(
            "\n\n".join(p for p in _paragraphs(node.help) if p.startswith("Example"))
        )
        examples += _example_lines(node.epilog)
        for i, para in enumerate(body):
            if i:
                lines.append(".PP")
            lines.append(_roff(para.replace("\n", " ")))
        for a in node.arguments:
            lines += [".TP", f"\\fI{_roff(a.value_name)}\\fR", _roff(a.help) or "\\&"]
        lines += _man_options(node)
        if examples:
            lines += [".PP", "Example:", ".RS", ".nf"]
            lines += [_roff(e) for e in examples]
            lines += [".fi", ".RE"]
    lines += [
        ".SH ENVIRONMENT",
        _roff(
            "Each setting is read from, in this order, its flag, its environment variable, the "
            "config file (mem config path), and its default."
        ),
    ]
    for key in KEYS.values():
        lines += [".TP", f"\\fB{key.env}\\fR", _roff(f"{key.name}: {key.help}.")]
    for env, text in (
        ("MEM_CONFIG", "the settings file (default: config.toml in the user config folder)."),
        ("MEM_CACHE_DIR", "the model and tokenizer cache (default: the user cache folder)."),
        ("MEM_BUSY_TIMEOUT_MS", "how long a writer waits for another's lock (30000)."),
        ("MEM_DEBUG", "set to 1 to print a traceback instead of the one-line error."),
        (
            "MEM_MCP_TOKEN",
            "the bearer token mem mcp --http checks on every request (else mcp_token_file's).",
        ),
        ("NO_COLOR", "no colour or styling (also TERM=dumb)."),
    ):
        lines += [".TP", f"\\fB{env}\\fR", _roff(text)]
    lines += [
        ".SH FILES",
        ".TP",
        "\\fI~/.local/share/mem/mem.db\\fR",
        "The default store.",
        ".TP",
        "\\fI~/.config/mem/config.toml\\fR",
        "The settings file.",
        ".TP",
        "\\fI~/.cache/mem/models/\\fR",
        "Converted GGUF models, each with its .sha256.",
        ".SH EXIT STATUS",
        ".TP",
        "0",
        "Success.",
        ".TP",
        "1",
        _roff("An error: bad input data, no store, a failed doctor check, a locked file."),
        ".TP",
        "2",
        _roff("A usage error: an unknown command or option, or a bad option value."),
        ".TP",
        "130",
        "Interrupted (Ctrl\\-C).",
        ".SH EXAMPLES",
        ".nf",
        _roff(
            'mem retain "Decided to book the Lisbon trip for May 9\\-16." --at 2026-03-21'.replace(
                "\\-", "-"
            )
        ),
        _roff('mem recall "What did Maya decide about the Lisbon trip?"'),
        _roff('llm -f mem:"Lisbon trip" "What did Maya decide?"'),
        _roff("mem --db ~/notes/mem.db mcp"),
        ".fi",
        ".SH SEE ALSO",
        "\\fBllm\\fR(1), \\fBsqlite3\\fR(1)",
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------


def generate() -> dict[Path, str]:
    tree = read_tree()
    return {
        OUTPUTS["bash"]: gen_bash(tree),
        OUTPUTS["zsh"]: gen_zsh(tree),
        OUTPUTS["fish"]: gen_fish(tree),
        OUTPUTS["man"]: gen_man(tree),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a file is stale")
    args = parser.parse_args(argv)
    # Help text must not depend on the terminal that runs this.
    import os

    os.environ["NO_COLOR"] = "1"
    outputs = generate()
    if args.check:
        stale = [p for p, text in outputs.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            print(
                f"stale: {p.relative_to(ROOT)} (run: python scripts/gen_docs.py)", file=sys.stderr
            )
        return 1 if stale else 0
    for path, text in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
