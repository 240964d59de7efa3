"""What the four job types do, on the corpus shipped with the recipe (US-INFRA-08).

Bad input (a path outside the corpus, an unknown branch or op) raises ``InvalidPayload``,
which fails the job at once; anything else (a file not there yet, a base document not yet
ingested) is an ordinary error that the retry schedule handles.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select

from .db import DBManager, Document, utcnow
from .plugins import PluginRegistry

__all__ = [
    "AnalysisService",
    "EvolutionService",
    "IngestionService",
    "IntegrityService",
    "InvalidPayload",
]

WORD_RE = re.compile(r"[A-Za-z']+")

#: Called between units of work: keeps the lease alive, True if a cancel was requested.
Checkpoint = Callable[[], bool]


class InvalidPayload(ValueError):
    """The payload can never succeed as given: retrying would not help."""


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _words(text: str) -> list[str]:
    return WORD_RE.findall(text.lower())


def _no_checkpoint() -> bool:
    return False


class IngestionService:
    def __init__(self, db: DBManager, corpus_root: Path) -> None:
        self.db = db
        self.corpus_root = corpus_root

    def resolve(self, relative: str) -> Path:
        """A corpus file by its path relative to ``corpus_root``; nothing outside it."""
        if not isinstance(relative, str) or not relative:
            raise InvalidPayload(f"each path must be a non-empty string, got {relative!r}")
        root = self.corpus_root.resolve()
        path = (root / relative).resolve()
        if not path.is_relative_to(root):
            raise InvalidPayload(f"path {relative!r} is outside the corpus root")
        if not root.is_dir():  # EC-16: say which setting is wrong
            raise FileNotFoundError(
                f"corpus root {root} does not exist; set NEXUS_CORPUS_ROOT to a directory"
            )
        return path

    def ingest_batch(
        self, paths: list[str], checkpoint: Checkpoint = _no_checkpoint
    ) -> dict[str, Any]:
        if not isinstance(paths, list) or not paths:
            raise InvalidPayload('ingest_batch needs {"paths": ["file.txt", ...]}')
        resolved = [(p, self.resolve(p)) for p in paths]
        documents, created = [], 0
        for relative, path in resolved:
            if checkpoint():
                raise InterruptedError("cancel requested")
            text = path.read_text(encoding="utf-8")
            with self.db.session() as session, session.begin():
                doc = session.scalar(select(Document).where(Document.path == relative))
                if doc is None:
                    doc = Document(path=relative)
                    session.add(doc)
                    created += 1
                doc.title = path.stem.replace("_", " ").title()
                doc.text = text
                doc.sha256 = _sha256(text)
                doc.line_count = len(text.splitlines())
                doc.word_count = len(_words(text))
                doc.ingested_at = utcnow()
                session.flush()
                documents.append(
                    {"id": doc.id, "path": relative, "sha256": doc.sha256, "words": doc.word_count}
                )
        return {"files": len(documents), "created": created, "documents": documents}

    def list_documents(self) -> list[dict[str, Any]]:
        with self.db.session() as session:
            rows = session.scalars(select(Document).order_by(Document.path)).all()
            return [
                {
                    "id": d.id,
                    "path": d.path,
                    "title": d.title,
                    "sha256": d.sha256,
                    "line_count": d.line_count,
                    "word_count": d.word_count,
                }
                for d in rows
            ]

    def document_text(self, document_id: str | None = None, path: str | None = None) -> Document:
        with self.db.session() as session:
            query = select(Document)
            query = (
                query.where(Document.id == document_id)
                if document_id
                else query.where(Document.path == path)
            )
            doc = session.scalar(query)
        if doc is None:
            raise LookupError(
                f"document {document_id or path!r} is not ingested; run ingest_batch first"
            )
        return doc


class AnalysisService:
    LAYERS = ("lexical", "structural", "stylistic")

    def __init__(self, ingestion: IngestionService, plugins: PluginRegistry) -> None:
        self.ingestion = ingestion
        self.plugins = plugins

    def analyze(self, payload: dict[str, Any]) -> dict[str, Any]:
        if not payload.get("document_id") and not payload.get("path"):
            raise InvalidPayload('analyze needs {"document_id": ...} or {"path": ...}')
        layers = payload.get("layers") or list(self.LAYERS)
        unknown = sorted(set(layers) - set(self.LAYERS))
        if unknown:
            raise InvalidPayload(f"unknown layers {unknown}; use {list(self.LAYERS)}")
        doc = self.ingestion.document_text(payload.get("document_id"), payload.get("path"))
        results = {}
        for layer in layers:
            run = self.plugins.run_layer(layer, doc.text, self._baseline(layer, doc.text))
            results[layer] = {
                "output": run.output,
                "confidence": run.confidence,
                "provider_name": run.provider_name,
                "provider_version": run.provider_version,
                "runtime_ms": run.runtime_ms,
                "fallback_reason": run.fallback_reason,
            }
        return {"document_id": doc.id, "path": doc.path, "layers": results}

    @staticmethod
    def _baseline(layer: str, text: str) -> dict[str, Any]:
        words = _words(text)
        if layer == "lexical":
            return {
                "tokens": len(words),
                "types": len(set(words)),
                "top_words": Counter(words).most_common(5),
            }
        if layer == "structural":
            sentences = [s for s in re.split(r"[.!?;:]+", text) if s.strip()]
            return {"lines": len(text.splitlines()), "clauses": len(sentences)}
        mean = sum(map(len, words)) / len(words) if words else 0.0
        ttr = len(set(words)) / len(words) if words else 0.0
        return {"mean_word_length": round(mean, 3), "type_token_ratio": round(ttr, 3)}


class EvolutionService:
    def __init__(self, ingestion: IngestionService) -> None:
        self.ingestion = ingestion

    def replay_branch(self, branch: str, checkpoint: Checkpoint = _no_checkpoint) -> dict[str, Any]:
        """Apply a branch's edits in order to its ingested base document."""
        if not isinstance(branch, str) or not re.fullmatch(r"[a-z0-9_]+", branch):
            raise InvalidPayload('branch_replay needs {"branch": "name"} (a-z, 0-9, _)')
        spec_path = self.ingestion.resolve(f"branches/{branch}.json")
        if not spec_path.is_file():
            raise InvalidPayload(f"no branch {branch!r} in the corpus (branches/{branch}.json)")
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
        doc = self.ingestion.document_text(path=spec["base"])
        text, steps = doc.text, []
        for seq, edit in enumerate(spec["edits"], start=1):
            if checkpoint():
                raise InterruptedError("cancel requested")
            text = self._apply(edit, text, seq)
            steps.append({"seq": seq, "op": edit["op"], "sha256": _sha256(text)})
        return {
            "branch": branch,
            "base_document_id": doc.id,
            "base_sha256": doc.sha256,
            "event_count": len(steps),
            "steps": steps,
            "final_sha256": _sha256(text),
            "word_delta": len(_words(text)) - len(_words(doc.text)),
        }

    @staticmethod
    def _apply(edit: dict[str, Any], text: str, seq: int) -> str:
        op = edit.get("op")
        if op == "replace":
            if edit["old"] not in text:
                raise InvalidPayload(f"edit {seq}: {edit['old']!r} is not in the text")
            return str(text.replace(edit["old"], edit["new"]))
        if op == "append":
            return text.rstrip("\n") + "\n" + str(edit["text"]) + "\n"
        if op == "delete":
            return str(text.replace(edit["text"], ""))
        raise InvalidPayload(f"edit {seq}: unknown op {op!r}; use replace, append or delete")


class IntegrityService:
    def __init__(self, db: DBManager) -> None:
        self.db = db

    def audit(self) -> dict[str, Any]:
        """Re-derive every document's checksum and counts from its stored text."""
        inconsistencies = []
        with self.db.session() as session:
            docs = session.scalars(select(Document).order_by(Document.path)).all()
            for doc in docs:
                actual = {
                    "sha256": _sha256(doc.text),
                    "line_count": len(doc.text.splitlines()),
                    "word_count": len(_words(doc.text)),
                }
                for field, value in actual.items():
                    stored = getattr(doc, field)
                    if stored != value:
                        inconsistencies.append(
                            {
                                "document_id": doc.id,
                                "path": doc.path,
                                "field": field,
                                "stored": stored,
                                "actual": value,
                            }
                        )
        return {"document_count": len(docs), "inconsistencies": inconsistencies}
