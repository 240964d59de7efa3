"""Row decoding shared by both dialects."""

from __future__ import annotations

import json

from durq._drivers.rows import policy_in


def test_policy_in_decodes_a_stored_policy_into_a_dict_of_its_own() -> None:
    stored = json.dumps({"kind": "fixed", "delays": [1.0, 5.0]})

    first = policy_in(stored)
    first["delays"].append(60.0)
    first["kind"] = "changed"

    assert policy_in(stored) == {"kind": "fixed", "delays": [1.0, 5.0]}


def test_policy_in_reads_empty_and_already_decoded_values() -> None:
    assert policy_in(None) == {}
    assert policy_in("{}") == {}
    assert policy_in({"kind": "exponential"}) == {"kind": "exponential"}
