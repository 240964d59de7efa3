"""durq's user-facing docs and its OpenAPI document speak durq's own words: the products
durq was made for and their decision ids belong in the recipes, not here. And the default
retry policy the docs state is the one the code applies."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import durq
from durq.api import create_app
from durq.retry import DEFAULT_POLICY

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = re.compile(r"(?i)\bseed\s*0\d\d\b|\bseed\s+\d\b|\bd-0\d\d\b|US-INFRA|§\s*\d")
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS)
def test_user_docs_use_durqs_own_words(doc: str) -> None:
    found = FOREIGN.findall((ROOT / doc).read_text())
    assert found == [], f"{doc} refers to {found}; describe durq's behaviour instead"


def test_openapi_uses_durqs_own_words(tmp_path: Path) -> None:
    app = durq.App(f"sqlite:///{tmp_path / 'd.db'}")
    spec = json.dumps(create_app(app).openapi())
    assert FOREIGN.findall(spec) == []
    app.close()


def test_the_documented_default_retry_policy_is_the_real_one() -> None:
    doc = (ROOT / "docs" / "states.md").read_text()
    (row,) = [line for line in doc.splitlines() if line.startswith("| the default")]
    assert DEFAULT_POLICY.to_dict() == {
        "kind": "exponential",
        "base": 2.0,
        "factor": 2.0,
        "jitter": 0.1,
        "cap": 3600.0,
    }
    assert "`Exponential(base=2, factor=2, jitter=0.1, cap=3600)`" in row
    assert f"`max_attempts={durq.Settings().default_max_attempts}`" in row
