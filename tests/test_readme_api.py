"""The README's Python API example runs as written, in a fresh folder."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_python_api_example_runs(tmp_path, monkeypatch, capsys) -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Python API") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)[1]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("['Ben works at Bosch in Stuttgart.'")
    assert printed[1] == "Ben works at Bosch in Stuttgart."
    assert printed[2].startswith("budget True budget: unknown budget 'huge'")
    assert (tmp_path / "notes.db").exists()
