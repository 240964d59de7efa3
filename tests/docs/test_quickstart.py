"""The README's quickstart, followed literally in an empty folder, works."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quickstart() -> tuple[str, list[list[str]]]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Install in your project", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    shell = re.findall(r"```sh\n(.*?)```", section, re.S)[-1]
    commands = [shlex.split(line.split("#", 1)[0]) for line in shell.splitlines() if line.strip()]
    return code, commands


def test_the_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    code, commands = quickstart()
    (tmp_path / "tasks.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURQ_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    outputs = []
    for command in commands:
        done = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        outputs.append(done.stdout)
    assert "enqueued job 1" in outputs[0]
    assert "succeeded" in outputs[-1] and "sent_to" in outputs[-1]
