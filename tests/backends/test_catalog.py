"""The catalog container: lookups by name and kind, errors that list what exists."""

from __future__ import annotations

import pytest

from pteforge.backends import (
    BackendCatalog,
    BackendCatalogError,
    EntryKind,
    PortableEntry,
    UnknownBackendError,
    XnnpackEntry,
    default_catalog,
)
from tests.backends.harness import delegated_backends, lower_with_partitioner, tiny_mlp


def test_unknown_name_lists_registered_names() -> None:
    catalog = default_catalog()
    with pytest.raises(UnknownBackendError) as raised:
        catalog.get("qnn")
    message = str(raised.value)
    assert "'qnn'" in message
    for name in catalog.names():
        assert name in message
    assert raised.value.known == sorted(catalog.names())


def test_typed_getters_reject_other_kinds_listing_the_right_ones() -> None:
    catalog = default_catalog()
    assert catalog.get_partitioner("xnnpack").name == "xnnpack"
    assert catalog.get_quantizer("xnnpack_pt2e_int8_static_per_channel").kind == EntryKind.QUANTIZER
    assert catalog.get_delegate().kind == EntryKind.DELEGATE
    with pytest.raises(
        BackendCatalogError,
        match=r"'portable' is a portable entry.*coreml, ethos-u, openvino, vulkan, xnnpack",
    ):
        catalog.get_partitioner("portable")
    with pytest.raises(BackendCatalogError, match="xnnpack_pt2e_int8_dynamic_per_channel"):
        catalog.get_quantizer("xnnpack")


def test_each_call_builds_an_independent_catalog() -> None:
    first, second = default_catalog(), default_catalog()
    assert first.names() == second.names()
    assert first.get("xnnpack") is not second.get("xnnpack")


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(BackendCatalogError, match="duplicate catalog entries: xnnpack"):
        BackendCatalog.of([XnnpackEntry(), PortableEntry(), XnnpackEntry()])


def test_describe_covers_every_entry_in_order() -> None:
    catalog = default_catalog()
    assert [item["name"] for item in catalog.describe()] == [item.name for item in catalog]


def test_xnnpack_options_reach_the_partitioner() -> None:
    entry = default_catalog().get_partitioner("xnnpack")
    model = tiny_mlp()
    whole = delegated_backends(lower_with_partitioner(entry.partitioner({}), model))
    per_op = delegated_backends(
        lower_with_partitioner(entry.partitioner({"per_op_mode": True}), model)
    )
    assert whole == ["XnnpackBackend"]
    assert len(per_op) > 1 and set(per_op) == {"XnnpackBackend"}
