"""The queues durq is measured against, and the raw-SQL ceilings.

Each module defines one :class:`bench.subject.Subject` and, where the subject needs one,
a ``worker`` entry point run as ``python -m bench.peers.<module> worker ...``.
"""
