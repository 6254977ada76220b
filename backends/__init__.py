"""pteforge.backends: the catalog of named lowering targets.

Nothing here registers anything at import time: :func:`default_catalog` builds the catalog and
:func:`register_lowering_backends` imports the upstream ``BackendDetails`` we ship.
"""

from pteforge.backends.catalog import BackendCatalog, CatalogEntry, EntryKind
from pteforge.backends.coreml import COREML_BACKEND_ID, CoreMLEntry
from pteforge.backends.defaults import default_catalog
from pteforge.backends.delegate import DelegateEntry
from pteforge.backends.entry import (
    BaseEntry,
    DelegateEntryBase,
    PartitionerEntry,
    PortableEntry,
    QuantizerEntryBase,
)
from pteforge.backends.errors import (
    BackendCatalogError,
    InvalidOptionsError,
    UnknownBackendError,
)
from pteforge.backends.ethos_u import ETHOS_U_BACKEND_ID, ETHOS_U_RECIPE, EthosUEntry
from pteforge.backends.openvino import OPENVINO_BACKEND_ID, OpenvinoEntry
from pteforge.backends.options import (
    CompileSpecOption,
    CoreMLOptions,
    DelegateOptions,
    EthosUOptions,
    NoOptions,
    OpenvinoOptions,
    VulkanOptions,
    XnnpackOptions,
)
from pteforge.backends.quantization import (
    XNNPACK_PT2E_RECIPES,
    EthosUInt8Recipe,
    Pt2eRecipe,
    QuantizationError,
    XnnpackPt2eRecipe,
)
from pteforge.backends.registry import (
    executable_backend_ids,
    register_lowering_backends,
    registered_backend_ids,
)
from pteforge.backends.vulkan import VULKAN_BACKEND_ID, VulkanEntry
from pteforge.backends.xnnpack import XNNPACK_BACKEND_ID, XnnpackEntry

__all__ = [
    "COREML_BACKEND_ID",
    "ETHOS_U_BACKEND_ID",
    "ETHOS_U_RECIPE",
    "OPENVINO_BACKEND_ID",
    "VULKAN_BACKEND_ID",
    "XNNPACK_BACKEND_ID",
    "XNNPACK_PT2E_RECIPES",
    "BackendCatalog",
    "BackendCatalogError",
    "BaseEntry",
    "CatalogEntry",
    "CompileSpecOption",
    "CoreMLEntry",
    "CoreMLOptions",
    "DelegateEntry",
    "DelegateEntryBase",
    "DelegateOptions",
    "EntryKind",
    "EthosUEntry",
    "EthosUInt8Recipe",
    "EthosUOptions",
    "InvalidOptionsError",
    "NoOptions",
    "OpenvinoEntry",
    "OpenvinoOptions",
    "PartitionerEntry",
    "PortableEntry",
    "Pt2eRecipe",
    "QuantizationError",
    "QuantizerEntryBase",
    "UnknownBackendError",
    "VulkanEntry",
    "VulkanOptions",
    "XnnpackEntry",
    "XnnpackOptions",
    "XnnpackPt2eRecipe",
    "default_catalog",
    "executable_backend_ids",
    "register_lowering_backends",
    "registered_backend_ids",
]
