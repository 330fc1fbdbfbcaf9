"""Prometheus text as the tests read it."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def metric_samples(text: str) -> Series:
    """``(metric name, labels) → value`` for every sample of an exposition."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
