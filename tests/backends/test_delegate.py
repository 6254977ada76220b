"""The whole-graph delegate entry: DelegationSpec from API-shaped options."""

from __future__ import annotations

import base64

import pytest

from pteforge.backends import InvalidOptionsError, UnknownBackendError, default_catalog


def test_builds_a_delegation_spec_with_decoded_compile_specs() -> None:
    entry = default_catalog().get_delegate()
    value = base64.b64encode(b"\x00\x01binary").decode()
    spec = entry.delegation_spec(
        {"backend_id": "XnnpackBackend", "compile_specs": [{"key": "k", "value_b64": value}]}
    )
    assert spec.backend_id == "XnnpackBackend"
    assert [(item.key, item.value) for item in spec.compile_specs] == [("k", b"\x00\x01binary")]


def test_unregistered_backend_id_lists_the_registered_ones() -> None:
    entry = default_catalog().get_delegate()
    with pytest.raises(
        UnknownBackendError, match=r"'NoSuchBackend'.*CoreMLBackend.*OpenvinoBackend"
    ):
        entry.delegation_spec({"backend_id": "NoSuchBackend"})


def test_missing_backend_id_is_named() -> None:
    with pytest.raises(InvalidOptionsError, match="backend_id"):
        default_catalog().get_delegate().delegation_spec({})


def test_badly_padded_base64_is_named() -> None:
    options = {"backend_id": "XnnpackBackend", "compile_specs": [{"key": "k", "value_b64": "abc"}]}
    with pytest.raises(InvalidOptionsError, match=r"compile_specs\.0\.value_b64.*base64"):
        default_catalog().get_delegate().delegation_spec(options)


def test_describe_lists_backend_ids_and_which_execute_here() -> None:
    described = default_catalog().get_delegate().describe()
    assert {"CoreMLBackend", "OpenvinoBackend", "VulkanBackend", "XnnpackBackend"} <= set(
        described["backend_ids"]
    )
    assert {"OpenvinoBackend", "XnnpackBackend"} <= set(described["executable_backend_ids"])
    assert not {"CoreMLBackend", "VulkanBackend"} & set(described["executable_backend_ids"])
