"""The kinds of catalog entries."""

from __future__ import annotations

import enum


class EntryKind(enum.StrEnum):
    """What a catalog entry produces."""

    PORTABLE = "portable"  # no delegation
    PARTITIONER = "partitioner"  # a Partitioner (e.g. XnnpackPartitioner)
    DELEGATE = "delegate"  # a whole-graph DelegationSpec for a registered backend id
    QUANTIZER = "quantizer"  # a pt2e quantization recipe applied before lowering
