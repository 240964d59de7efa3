"""The plugin registry and its provider chain with fallback (US-INFRA-15, FR-024…027)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from opentelemetry.trace import Tracer

from .observability import get_tracer

__all__ = [
    "DeterministicLayerPlugin",
    "LayerPlugin",
    "MLStubLayerPlugin",
    "PluginExecution",
    "PluginRegistry",
]

BASELINE_CONFIDENCE = 0.6
ML_CONFIDENCE_BOOST = 0.1
ML_CONFIDENCE_CAP = 0.95


@dataclass(frozen=True, slots=True)
class PluginExecution:
    output: dict[str, Any]
    confidence: float
    provider_name: str
    provider_version: str
    runtime_ms: int
    fallback_reason: str | None = None


class LayerPlugin(Protocol):
    name: str
    version: str

    def supports(self, layer: str) -> bool: ...

    def healthcheck(self) -> bool: ...

    def run(
        self, layer: str, text: str, baseline: dict[str, Any], confidence: float
    ) -> tuple[dict[str, Any], float]: ...


class DeterministicLayerPlugin:
    """Returns the layer's baseline output at its baseline confidence."""

    name = "deterministic"
    version = "1.0"

    def supports(self, layer: str) -> bool:
        return True

    def healthcheck(self) -> bool:
        return True

    def run(
        self, layer: str, text: str, baseline: dict[str, Any], confidence: float
    ) -> tuple[dict[str, Any], float]:
        return dict(baseline), confidence


@dataclass
class MLStubLayerPlugin:
    """A stand-in for an ML provider, gated by ``plugin_ml_enabled`` (FR-027)."""

    enabled: bool
    name: str = "ml_stub"
    version: str = "0.1-stub"

    def supports(self, layer: str) -> bool:
        return self.enabled

    def healthcheck(self) -> bool:
        return self.enabled

    def run(
        self, layer: str, text: str, baseline: dict[str, Any], confidence: float
    ) -> tuple[dict[str, Any], float]:
        enriched = dict(baseline) | {"ml_enriched": True}
        return enriched, min(confidence + ML_CONFIDENCE_BOOST, ML_CONFIDENCE_CAP)


@dataclass
class PluginRegistry:
    profile: str
    ml_enabled: bool
    plugins: dict[str, LayerPlugin] = field(default_factory=dict)
    tracer: Tracer = field(default_factory=get_tracer)

    def __post_init__(self) -> None:
        if not self.plugins:
            self.plugins = {
                "deterministic": DeterministicLayerPlugin(),
                "ml_stub": MLStubLayerPlugin(enabled=self.ml_enabled),
            }
        if self.profile not in ("deterministic", "ml_first", "ml_only"):
            raise ValueError(
                f"unknown plugin profile {self.profile!r}; use deterministic, ml_first or ml_only"
            )

    def health(self) -> dict[str, bool]:
        return {name: plugin.healthcheck() for name, plugin in self.plugins.items()}

    def _profile_chain(self) -> list[LayerPlugin]:
        if self.profile == "ml_only":
            return [self.plugins["ml_stub"]]
        if self.profile == "ml_first":
            return [self.plugins["ml_stub"], self.plugins["deterministic"]]
        return [self.plugins["deterministic"]]

    def run_layer(
        self,
        layer: str,
        text: str,
        baseline: dict[str, Any],
        confidence: float = BASELINE_CONFIDENCE,
    ) -> PluginExecution:
        """Try each provider of the profile in turn; the first that succeeds answers, and
        why earlier ones were skipped is kept in ``fallback_reason``. One span per layer
        (US-INFRA-23) says which provider answered and why others were passed over."""
        with self.tracer.start_as_current_span(
            "nexus_babel.plugin", attributes={"nexus.plugin.layer": layer}
        ) as span:
            execution = self._run_chain(layer, text, baseline, confidence)
            span.set_attributes(
                {
                    "nexus.plugin.provider_name": execution.provider_name,
                    "nexus.plugin.provider_version": execution.provider_version,
                    "nexus.plugin.confidence": execution.confidence,
                    "nexus.plugin.fallback_reason": execution.fallback_reason or "",
                }
            )
            return execution

    def _run_chain(
        self, layer: str, text: str, baseline: dict[str, Any], confidence: float
    ) -> PluginExecution:
        reasons: list[str] = []
        for plugin in self._profile_chain():
            if not plugin.supports(layer):
                reasons.append(f"{plugin.name}: unsupported")
                continue
            started = time.perf_counter()
            try:
                output, conf = plugin.run(layer, text, baseline, confidence)
            except Exception as exc:  # FR-026: one provider failing falls back to the next
                reasons.append(f"{plugin.name}: {type(exc).__name__}: {exc}")
                continue
            return PluginExecution(
                output=output,
                confidence=conf,
                provider_name=plugin.name,
                provider_version=plugin.version,
                runtime_ms=int((time.perf_counter() - started) * 1000),
                fallback_reason="; ".join(reasons) or None,
            )
        return PluginExecution(
            output=dict(baseline),
            confidence=0.0,
            provider_name="none",
            provider_version="0",
            runtime_ms=0,
            fallback_reason="all_plugins_failed",
        )
