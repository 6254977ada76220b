"""Typed option models of catalog entries and their validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pteforge.backends.errors import InvalidOptionsError
from pteforge.contracts.plan import CompileSpecValue, DelegateTarget


class EntryOptions(BaseModel):
    """Base of every options model: unknown fields are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoOptions(EntryOptions):
    """An entry that takes no options."""


class XnnpackOptions(EntryOptions):
    """Options of the ``xnnpack`` partitioner entry (``XnnpackPartitioner`` arguments)."""

    precision: Literal["fp32", "static_quant", "dynamic_quant"] | None = Field(
        default=None,
        description="Only delegate patterns of this precision; null takes every precision.",
    )
    per_op_mode: bool = Field(
        default=False, description="Delegate each operator as its own partition."
    )


CoreMLTarget = Literal[
    "iOS15", "iOS16", "iOS17", "iOS18", "iOS26",
    "macOS12", "macOS13", "macOS14", "macOS15", "macOS26",
]  # fmt: skip


class CoreMLOptions(EntryOptions):
    """Options of the ``coreml`` partitioner entry (``CoreMLBackend`` compile specs)."""

    compute_unit: Literal["ALL", "CPU_ONLY", "CPU_AND_GPU", "CPU_AND_NE"] = "ALL"
    compute_precision: Literal["float16", "float32"] = "float16"
    minimum_deployment_target: CoreMLTarget | None = Field(
        default=None, description="Oldest OS the model must load on; null lets coremltools pick."
    )
    multimethod_weight_sharing: Literal["positional", "disabled"] = Field(
        default="positional",
        description="positional: methods are combined into one multifunction model whose "
        "weights are stored once; disabled: each method is compiled on its own.",
    )
    take_over_mutable_buffer: bool = True
    lower_full_graph: bool = Field(
        default=False, description="Fail instead of leaving unsupported operators outside."
    )
    skip_ops: tuple[str, ...] = Field(
        default=(), description="Edge operator names (e.g. aten.add.Tensor) kept out of CoreML."
    )


class OpenvinoOptions(EntryOptions):
    """Options of the ``openvino`` partitioner entry (``OpenvinoBackend`` compile specs)."""

    device: str = Field(
        default="CPU",
        pattern=r"^[A-Z]+(\.[0-9]+)?$",
        description="OpenVINO device the model is compiled for and imported on at run time "
        "(compile spec 'device'), e.g. CPU, GPU, GPU.1, NPU; it must exist on both hosts.",
    )


class VulkanOptions(EntryOptions):
    """Options of the ``vulkan`` partitioner entry (``VulkanPartitioner`` compile options)."""

    force_fp16: bool = Field(default=False, description="Compute fp32 tensors in fp16.")
    small_texture_limits: bool = Field(
        default=False,
        description="Texture limit 2048 (most desktop and laptop GPUs) instead of the mobile "
        "default 16384.",
    )


EthosUTarget = Literal[
    "ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256",
    "ethos-u65-256", "ethos-u65-512",
    "ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048",
]  # fmt: skip


class EthosUOptions(EntryOptions):
    """Options of the ``ethos-u`` partitioner entry (``EthosUCompileSpec`` arguments)."""

    target: EthosUTarget = Field(
        default="ethos-u55-128",
        description="Ethos-U accelerator configuration Vela compiles for (NPU and MAC count); "
        "its system configuration and memory mode are upstream's defaults for it.",
    )


DelegateOptions = DelegateTarget
"""Options of the whole-graph ``delegate`` entry: the plan's delegate target itself."""

CompileSpecOption = CompileSpecValue
"""One compile spec of :data:`DelegateOptions`, its value as base64."""


M = TypeVar("M", bound=BaseModel)


def validate_options(
    entry_name: str, model: type[M], options: Mapping[str, Any] | BaseModel | None
) -> M:
    """Validate ``options`` against ``model``; errors name the entry and every bad field."""
    if isinstance(options, model):
        return options
    if isinstance(options, BaseModel):
        options = options.model_dump()
    try:
        return model.model_validate(dict(options or {}))
    except ValidationError as error:
        raise InvalidOptionsError(_describe(entry_name, error)) from None
    except TypeError as error:
        raise InvalidOptionsError(f"options of {entry_name!r} must be an object: {error}") from None


def _describe(entry_name: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "(options)"
        problems.append(f"{field}: {item['msg']}")
    return f"invalid options for {entry_name!r}: " + "; ".join(problems)
