"""The CLI's documentation: every command's --help has an example and no Python types,
usage errors exit 2, and the completions and man page generated from the CLI are current."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from memcli.cli import app
from memcli.store import FACT_TYPES

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def command_paths() -> list[list[str]]:
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="mem")
    out: list[list[str]] = [[]]

    def walk(cmd, path: list[str]) -> None:
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                out.append([*path, name])
                walk(sub, [*path, name])

    walk(root, [])
    return out


PYTHON_TYPES = re.compile(r"<(bool|str|int|float|path|list\[[^\]]*\])>|list\[|\bNoneType\b")


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "mem")
def test_help_has_an_example_and_no_python_types(path):
    r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    assert "Example" in r.stdout, f"mem {' '.join(path)} --help has no example"
    assert not PYTHON_TYPES.search(r.stdout), PYTHON_TYPES.search(r.stdout).group(0)


def test_usage_errors_exit_2_and_say_what_was_wrong(db_path):
    assert runner.invoke(app, ["--db", str(db_path), "retain", "x"]).exit_code == 0
    for args, needle in (
        (["recall", "x", "--arms", "bogus"], "unknown arm 'bogus'"),
        (["recall", "x", "--limit", "0"], "--limit"),
        (["recall", "x", "--now", "the day after never"], "--now"),
        (["retain", "x", "--at", "the day after never"], "--at"),
        (["recall", "x", "--budget", "huge"], "huge"),
        (["recall", "x", "--include-chunks", "--max-chunk-tokens", "-5"], "--max-chunk-tokens"),
        (["list", "--limit", "0"], "--limit"),
        (["list", "--offset", "-1"], "--offset"),
        (["list", "--type", "bogus"], "bogus"),
        (["list", "--since", "the day after never"], "--since"),
        (["forget", "--before", "the day after never", "--yes"], "--before"),
        (["correct", "1", "y", "--at", "the day after never"], "--at"),
        (["retain", "x", "--type", "bogus"], "bogus"),
        (["recall"], "QUERY"),
        (["no-such-command"], "No such command"),
    ):
        r = runner.invoke(app, ["--db", str(db_path), *args])
        assert r.exit_code == 2, (args, r.output)
        assert needle in r.stderr, (args, r.stderr)


def load_gen_docs():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_completions_and_man_page_are_current():
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr + "\nrun: python scripts/gen_docs.py"


def test_check_fails_on_a_stale_file(tmp_path, monkeypatch):
    gen = load_gen_docs()
    outputs = {}
    for key, path in gen.OUTPUTS.items():
        copy = tmp_path / path.name
        copy.write_text(path.read_text())
        outputs[key] = copy
    monkeypatch.setattr(gen, "OUTPUTS", outputs)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 0
    outputs["man"].write_text(outputs["man"].read_text().replace("mem recall", "mem recal"))
    assert gen.main(["--check"]) == 1


def every_command() -> list[str]:
    return [" ".join(p) for p in command_paths() if p]


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
def test_man_page_renders_every_command_and_option():
    r = subprocess.run(
        ["man", "-l", str(ROOT / "man" / "mem.1")],
        capture_output=True,
        text=True,
        env={"MANWIDTH": "250", "PATH": "/usr/bin:/bin", "MAN_KEEP_FORMATTING": ""},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    page = re.sub(r".\x08", "", r.stdout)  # no overstrike bold
    for name in every_command():
        assert f"mem {name}" in page, name
    words = set(re.findall(r"--?[\w-]+", page))
    tree = load_gen_docs().read_tree()
    for node in load_gen_docs().walk(tree):
        for option in node.options:
            for name in option.names:
                assert name in words, f"{node.name} {name}"
    for section in ("ENVIRONMENT", "EXIT STATUS", "MEM_THREADS", "MEM_CONFIG"):
        assert section in page


def bash_complete(*words: str) -> list[str]:
    script = (
        f"source {ROOT / 'completions' / 'mem.bash'}; "
        'COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _mem; '
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    r = subprocess.run(
        ["bash", "-c", script, "bash", *words], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    return [x for x in r.stdout.splitlines() if x]


def test_bash_completion_offers_commands_options_and_choices():
    assert set(every_command()) >= {"retain", "recall", "mcp", "doctor", "config"}
    top = bash_complete("mem", "")
    assert {n.split()[0] for n in every_command()} == set(top)
    assert bash_complete("mem", "recall", "--budget", "") == ["low", "mid", "high"]
    assert bash_complete("mem", "recall", "--max-t") == ["--max-tokens"]
    assert bash_complete("mem", "config", "") == ["path", "show", "set", "unset"]
    assert bash_complete("mem", "models", "add", "--as", "") == ["embedder", "reranker"]
    assert bash_complete("mem", "retain", "--file", "Makef") == ["Makefile"]
    # A value checked by mem rather than declared as a choice: the fact types.
    for command in ("retain", "recall", "list", "forget"):
        assert bash_complete("mem", command, "--type", "") == list(FACT_TYPES), command


@pytest.mark.parametrize("shell,flag,name", [("zsh", "-n", "_mem"), ("fish", "-n", "mem.fish")])
def test_zsh_and_fish_completions_parse(shell, flag, name):
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    r = subprocess.run([shell, flag, str(ROOT / "completions" / name)], capture_output=True)
    assert r.returncode == 0, r.stderr


def test_fish_completion_offers_choices():
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    script = f"source {ROOT / 'completions' / 'mem.fish'}; complete -C 'mem recall --budget '"
    r = subprocess.run(["fish", "-c", script], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert sorted(line.split("\t")[0] for line in r.stdout.splitlines()) == ["high", "low", "mid"]


def test_the_readme_way_onto_path_works(tmp_path, db_path):
    """README: `ln -s "$PWD/.venv/bin/mem" ~/.local/bin/mem` gives a plain `mem` anywhere
    (the venv's script names its own interpreter, so no activation is needed)."""
    script = Path(sys.executable).with_name("mem")
    if not script.exists():
        pytest.skip("mem is not installed as a script next to this python")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mem").symlink_to(script)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(Path.home()), "NO_COLOR": "1"}
    r = subprocess.run(["mem", "--version"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("mem ")
    r = subprocess.run(
        ["mem", "--db", str(db_path), "doctor", "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
