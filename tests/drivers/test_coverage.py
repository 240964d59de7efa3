"""Every public operation of the driver has a conformance test here: a new operation
without one fails the suite, naming it.

A test covers the operation its name starts with: ``test_<operation>`` or
``test_<operation>_<what>``, taking the longest operation name that fits (so
``test_job_finish_many_...`` covers ``job_finish_many``, not ``job_finish``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path
from types import FunctionType

from durq._drivers import Driver
from durq._drivers.postgres.driver import PostgresDriver
from durq._drivers.sqlite.driver import SqliteDriver

HERE = Path(__file__).parent
CONCRETE: tuple[type[Driver], ...] = (PostgresDriver, SqliteDriver)


def driver_operations() -> set[str]:
    """Public names of ``Driver`` (methods, and the attributes its classes declare) and
    the public methods the concrete drivers add."""
    names = {name for name in dir(Driver) if not name.startswith("_")}
    for cls in Driver.__mro__:
        names |= {name for name in getattr(cls, "__annotations__", {}) if not name.startswith("_")}
    for cls in CONCRETE:
        names |= {
            name
            for name, value in vars(cls).items()
            if not name.startswith("_") and isinstance(value, FunctionType | staticmethod)
        }
    return names


def conformance_test_names(folder: Path = HERE) -> list[str]:
    found = []
    for path in sorted(folder.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found.append(node.name)
    return found


def covered(operations: Iterable[str], tests: Iterable[str]) -> set[str]:
    """The operations some test is named after (each test counts for its longest match)."""
    by_length = sorted(operations, key=len, reverse=True)
    hit: set[str] = set()
    for test in tests:
        for op in by_length:
            if test == f"test_{op}" or test.startswith(f"test_{op}_"):
                hit.add(op)
                break
    return hit


def test_every_driver_operation_has_a_conformance_test() -> None:
    operations = driver_operations()
    missing = sorted(operations - covered(operations, conformance_test_names()))
    assert not missing, (
        "driver operations without a conformance test in tests/drivers/ (add a "
        f"test_<operation>_<what> function for each): {', '.join(missing)}"
    )


def test_the_operation_list_is_what_the_driver_offers() -> None:
    operations = driver_operations()
    assert {"job_claim", "job_finish", "job_finish_many", "transaction", "migrate"} <= operations
    assert {"capabilities", "dialect", "foreign_executor", "is_transient", "listen"} <= operations
    assert {"connect", "finish_many_params"} <= operations  # added by the concrete drivers
    assert not any(name.startswith("_") for name in operations)
    assert len(operations) > 70


def test_a_test_covers_only_its_longest_operation() -> None:
    ops = ["job_finish", "job_finish_many", "job_claim", "job_claim_id"]
    tests = ["test_job_finish_many_x", "test_job_claim_id", "test_job_claimed_elsewhere"]
    assert covered(ops, tests) == {"job_finish_many", "job_claim_id"}
    assert covered(ops, ["test_job_finish", "test_job_claim_skips_x"]) == {
        "job_finish",
        "job_claim",
    }
