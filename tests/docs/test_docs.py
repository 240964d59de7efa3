"""The docs say what the code does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import durq
from durq import states
from durq.types import JobState

ROOT = Path(__file__).resolve().parents[2]
EDGE = re.compile(r"^\s*(\w+)\s*-->\s*(\w+)\s*:\s*(.+)$")


def _edges(text: str) -> dict[tuple[JobState, JobState], frozenset[str]]:
    block = text.split("stateDiagram-v2", 1)[1].split("```", 1)[0]
    edges = {}
    for line in block.splitlines():
        match = EDGE.match(line)
        if match and match.group(1) != "[*]" and "[*]" not in line.split("-->")[0]:
            actions = frozenset(a.strip() for a in match.group(3).split("/"))
            edges[(JobState(match.group(1)), JobState(match.group(2)))] = actions
    return edges


@pytest.mark.parametrize("doc", ["README.md", "docs/states.md"])
def test_state_diagram_equals_the_transitions_table(doc: str) -> None:
    assert _edges((ROOT / doc).read_text()) == states.TRANSITIONS


def test_public_api_is_sorted_and_importable() -> None:
    assert durq.__all__ == sorted(durq.__all__)
    for name in durq.__all__:
        assert getattr(durq, name) is not None


def test_readme_starts_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text().splitlines()[:6]
    assert "make demo" in "\n".join(head) and "make test" in "\n".join(head)


def test_ci_runs_exactly_make_test() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert "exec make test" in script
