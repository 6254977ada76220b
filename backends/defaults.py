"""The catalog pteforge ships, listed explicitly."""

from __future__ import annotations

from pteforge.backends.catalog import BackendCatalog
from pteforge.backends.coreml import CoreMLEntry
from pteforge.backends.delegate import DelegateEntry
from pteforge.backends.entry import PortableEntry
from pteforge.backends.ethos_u import EthosUEntry
from pteforge.backends.openvino import OpenvinoEntry
from pteforge.backends.quantization import (
    XNNPACK_PT2E_RECIPES,
    EthosUInt8Recipe,
    XnnpackPt2eRecipe,
)
from pteforge.backends.vulkan import VulkanEntry
from pteforge.backends.xnnpack import XnnpackEntry


def default_catalog() -> BackendCatalog:
    """A new catalog: portable, xnnpack, openvino, coreml, vulkan, ethos-u, delegate, the
    XNNPACK pt2e int8 recipes and the Ethos-U int8 recipe."""
    recipes = [XnnpackPt2eRecipe(name) for name in XNNPACK_PT2E_RECIPES]
    return BackendCatalog.of(
        [
            PortableEntry(),
            XnnpackEntry(),
            OpenvinoEntry(),
            CoreMLEntry(),
            VulkanEntry(),
            EthosUEntry(),
            DelegateEntry(),
            *recipes,
            EthosUInt8Recipe(),
        ]
    )
