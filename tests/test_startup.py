"""What a cold `mem recall` process loads: each module here cost a measured part of the
start-up (bench/RESULTS.md, scale section) and recall has no need of it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from memcli.store.vectors import sorted_unique

# module: why it must stay out of a recall
NOT_LOADED = {
    "pydantic": "typer's option coercion, ~0.2 s (memcli/cliparams.py converts instead)",
    "tiktoken": "the encoding's load, ~0.15 s (facts store their token counts)",
    "numpy.ma": "imported by np.unique, ~14 ms (store/vectors.py sorted_unique)",
    "llama_cpp.llama": "llama-cpp-python's high-level layer (memcli/models/llama_lib.py)",
    "jinja2": "imported by llama-cpp-python's chat formats (memcli/models/llama_lib.py)",
}


def run_and_list_loaded(argv: list[str], names) -> tuple[subprocess.CompletedProcess, list]:
    """Run `mem ARGV` in a new process: (the finished process, which of names it had
    imported when it exited)."""
    probe = (
        "import atexit, json, sys\n"
        f"names = {sorted(names)!r}\n"
        "atexit.register(lambda: print(json.dumps([n for n in names if n in sys.modules]),"
        " file=sys.stderr))\n"
        f"sys.argv = ['mem', *{list(argv)!r}]\n"
        "from memcli.cli import main\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads(proc.stderr.strip().splitlines()[-1])


def test_a_recall_after_retain_loads_none_of_the_costly_modules(tmp_path):
    db = tmp_path / "m.db"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "memcli",
            "--db",
            str(db),
            "retain",
            "Maya booked Lisbon for May 4.",
        ],
        check=True,
        capture_output=True,
    )
    proc, loaded = run_and_list_loaded(
        ["--db", str(db), "recall", "where is Maya going?", "--format", "json"], NOT_LOADED
    )
    result = json.loads(proc.stdout)
    assert "Lisbon" in result["results"][0]["text"]
    assert result["total_tokens"] == sum(r["tokens"] for r in result["results"]) > 0
    assert not loaded, {name: NOT_LOADED[name] for name in loaded}


def test_a_text_recall_that_fills_its_budget_loads_no_tokenizer(tmp_path):
    """Text output pays its header by the header's bytes when the budget is roomy: counting
    it loaded tiktoken into every cold recall whose memories filled --max-tokens (cold p50
    0.30 -> 0.37 s at 100k facts)."""
    db = tmp_path / "m.db"
    rows = "".join(
        json.dumps({"text": f"Parcel {i} for flat {i} came on day {i % 28 + 1} of the month."})
        + "\n"
        for i in range(60)
    )
    subprocess.run(
        [sys.executable, "-m", "memcli", "--db", str(db), "retain", "--jsonl", "-"],
        input=rows,
        text=True,
        check=True,
        capture_output=True,
    )
    proc, loaded = run_and_list_loaded(
        ["--db", str(db), "recall", "parcel for the flat", "--max-tokens", "700"], ["tiktoken"]
    )
    assert 10 < proc.stdout.count("\n[") < 60  # the budget cut the list
    assert loaded == []


@pytest.mark.parametrize(
    "values",
    [[], [5], [3, 3], [2, 1, 2, 1], list(range(10, 0, -1)), [0, 7, 7, 7, 1, 0]],
)
def test_sorted_unique_is_np_unique(values):
    arr = np.asarray(values, dtype=np.int64)
    assert sorted_unique(arr).tolist() == np.unique(arr).tolist()
    rng = np.random.default_rng(len(values))
    big = rng.integers(0, 50, size=200)
    assert sorted_unique(big).tolist() == np.unique(big).tolist()


@pytest.mark.parametrize(
    "argv,name",
    [
        ([], None),
        (["--help"], None),
        (["--version"], None),
        (["recall", "q"], "recall"),
        (["--db", "recall", "retain", "x"], "retain"),  # a file named like a command
        (["--bank", "work", "--db", "m.db", "list"], "list"),
        (["--db=m.db", "show", "3"], "show"),
        (["--", "recall"], None),
        (["models", "add", "x.gguf"], "models"),
    ],
)
def test_the_command_a_line_names(argv, name):
    from memcli.cli import invoked_command

    assert invoked_command(argv) == name


def test_building_only_the_named_command_changes_no_help_or_error():
    """Each command's --help, and typer's errors for a typo or a group, read the same whether
    typer built every command or only the one named."""
    from typer.testing import CliRunner

    from memcli.cli import app, invoked_command, only_command

    lines = [[name, "--help"] for name in ("retain", "recall", "list", "show", "mcp", "bench")]
    lines += [["recal", "x"], ["models", "--help"], ["config", "nope"], ["recall"]]
    runner = CliRunner()
    for argv in lines:
        everything = runner.invoke(app, argv, env={"COLUMNS": "100"})
        with only_command(invoked_command(argv)):
            one = runner.invoke(app, argv, env={"COLUMNS": "100"})
        assert (one.exit_code, one.output) == (everything.exit_code, everything.output), argv
    assert len(app.registered_commands) > 10  # restored afterwards


def run_mem(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memcli", *args], capture_output=True, text=True, input=stdin
    )


def test_leaving_without_teardown_loses_nothing(tmp_path):
    """main() ends with os._exit (cli.exit_now): the store file alone holds every write
    (the connection was closed, so the WAL went into it), piped output arrives whole, and
    the status is what the command meant."""
    db = tmp_path / "m.db"
    lines = "\n".join(
        json.dumps({"text": f"Note {i}: the blue kettle is on shelf {i}."}) for i in range(40)
    )
    assert run_mem("--db", str(db), "retain", "--jsonl", "-", stdin=lines).returncode == 0
    assert not (tmp_path / "m.db-wal").exists() or (tmp_path / "m.db-wal").stat().st_size == 0
    alone = tmp_path / "copy.db"
    alone.write_bytes(db.read_bytes())  # the file without its -wal, as a user copies it
    listed = run_mem("--db", str(alone), "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 40
    exported = run_mem("--db", str(db), "export")
    assert exported.returncode == 0
    assert exported.stdout.endswith("\n") and len(exported.stdout.splitlines()) > 40
    # Statuses: success, a one-line error, a usage error.
    assert run_mem("--db", str(tmp_path / "none.db"), "recall", "x").returncode == 1
    assert run_mem("--db", str(db), "recall", "x", "--max-tokens", "abc").returncode == 2
    assert run_mem("--version").returncode == 0


def test_the_real_llama_cpp_package_imports_after_the_bindings_alone():
    """llama_lib loads llama.cpp's bindings under a stand-in package: a later
    `import llama_cpp` in the same process (a plugin, the doctor) gets the real package, and
    llama.cpp's log stays silenced after it."""
    probe = (
        "import sys\n"
        "from memcli.models.load import load_embedder\n"
        "assert load_embedder().embed(['hi']).shape == (1, 384)\n"
        "assert 'llama_cpp' not in sys.modules and 'llama_cpp.llama_cpp' in sys.modules\n"
        "import llama_cpp\n"
        "assert llama_cpp.Llama and llama_cpp.__version__\n"
        "assert llama_cpp.llama_cpp is sys.modules['llama_cpp.llama_cpp']\n"
        "assert load_embedder().embed(['hi again']).shape == (1, 384)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # the real package installs its own log callback: llama.cpp must stay silent after it
    assert proc.stderr == "" and proc.stdout == ""


def _recall_probe(db, *args: str) -> str:
    """A `mem recall` in a fresh process that reports, at exit, whether llama.cpp was loaded
    and how many embedders were made."""
    return (
        "import atexit, json, sys\n"
        "def report():\n"
        "    emb = sys.modules.get('memcli.models.load')\n"
        "    made = len(emb._cache) if emb else 0\n"
        "    print(json.dumps(['llama_cpp.llama_cpp' in sys.modules, made]), file=sys.stderr)\n"
        "atexit.register(report)\n"
        f"sys.argv = ['mem', '--db', {str(db)!r}, 'recall', *{list(args)!r}]\n"
        "from memcli.cli import main\n"
        "main()\n"
    )


@pytest.mark.parametrize(
    ("args", "loads_model"),
    [
        (["where is Maya going?"], True),
        (["where is Maya going?", "--arms", "semantic,keyword"], True),
        (["where is Maya going?", "--arms", "keyword"], False),
    ],
)
def test_the_query_embedder_is_preloaded_once_and_only_when_needed(tmp_path, args, loads_model):
    """The recall command starts loading its embedder before it opens the store
    (models/preload.py): the preload and the pipeline's own load are one model; a
    keyword-only recall loads none."""
    db = tmp_path / "m.db"
    subprocess.run(
        [sys.executable, "-m", "memcli", "--db", str(db), "retain", "Maya flies to Lisbon."],
        check=True,
        capture_output=True,
    )
    proc = subprocess.run(
        [sys.executable, "-c", _recall_probe(db, *args, "--format", "json")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Lisbon" in json.loads(proc.stdout)["results"][0]["text"]
    loaded, made = json.loads(proc.stderr.strip().splitlines()[-1])
    assert (loaded, made) == ((True, 1) if loads_model else (False, 0))


def test_the_preload_leaves_a_first_conversion_to_the_command(tmp_path):
    """With nothing converted yet, the preload does nothing: a recall that fails at once (no
    store) would otherwise end the process half way through writing the GGUF."""
    import os

    cache = tmp_path / "cache"
    probe = (
        "import threading\n"
        "from memcli.models.preload import preload_embedder\n"
        "preload_embedder(None)\n"
        "for t in threading.enumerate():\n"
        "    if t.name == 'mem-preload':\n"
        "        t.join()\n"
    )
    env = {**os.environ, "MEM_CACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    models = cache / "models"
    assert not models.exists() or not any(models.iterdir()), list(models.iterdir())
