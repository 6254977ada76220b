"""The lowering plan as one strict, typed model, the only one: the library, ``pteforge
compile`` and ``POST /v1/compile-jobs`` all validate a plan with :class:`PlanSpec` and the
manager lowers from it as it is; the OpenAPI document shows its schema, ``GET /v1/backends``
lists its program-wide options from its fields, and :func:`canonical_plan` gives its stored
form and the hash under which compiled artifacts are reused.

``{"methods": {METHOD: TARGET}, "all": TARGET}`` plus program-wide options
(:meth:`PlanSpec.program_wide`: ``"share_mutable_buffers"``, ``"constant_methods"``,
``"verify"``). TARGET is
``{"partitioners": [...]}``, ``{"delegate": {...}}`` or ``{}``, each optionally with
``"quantize"`` and ``"calibration"``.
Every level refuses keys it does not know. What needs the backend catalog or the program
(partitioner names, backend ids, recipes, method names, tensor dtypes) is checked by the
manager (``pteforge.manager.plan_check``), not here.

:mod:`pteforge.contracts.plan_problems` words a validation error as the field the user wrote
(``all.partitioners[0]``, ``methods.encode.delegate.backend_id``) and a reason.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    Tag,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError, PydanticUndefined

from pteforge.contracts.json_types import (
    Base64Text,
    FailFastList,
    JsonObject,
    JsonValue,
    at_most_entries,
)
from pteforge.contracts.names import METHOD_NAME_PATTERN

__all__ = [
    "DEFAULT_VERIFY_MIN_SQNR_DB",
    "DEFAULT_VERIFY_RTOL",
    "CalibrationTensor",
    "CompileSpecValue",
    "DelegateTarget",
    "PartitionerItem",
    "PartitionerSpec",
    "PlanSpec",
    "TargetSpec",
    "VerifySpec",
    "canonical_plan",
]

DEFAULT_VERIFY_RTOL = 1e-4
"""``verify.rtol`` when the plan does not give it."""
DEFAULT_VERIFY_MIN_SQNR_DB = 20.0
"""``verify.min_sqnr_db`` when the plan does not give it."""

Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
"""A finite JSON number (an integer is taken as a float; true and "1" are not numbers)."""


class PlanPart(BaseModel):
    """A part of a plan: unknown keys are refused (a typo must not be silently ignored);
    ``what`` is how an error calls it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    what: ClassVar[str] = "a plan part"


class PartitionerSpec(PlanPart):
    """A catalog partitioner with options (the catalog checks the options)."""

    what: ClassVar[str] = "a partitioner"
    name: str = Field(min_length=1, description="A catalog partitioner name (GET /v1/backends).")
    options: JsonObject | None = Field(
        default=None, description="The partitioner's options, per its catalog options_schema."
    )


NAME_TAG = "partitioner name"
OBJECT_TAG = "partitioner object"


def _partitioner_form(value: Any) -> str | None:
    if isinstance(value, str):
        return NAME_TAG
    if isinstance(value, dict | PartitionerSpec):
        return OBJECT_TAG
    return None


PartitionerItem = Annotated[
    Annotated[str, Tag(NAME_TAG), Field(min_length=1)]
    | Annotated[PartitionerSpec, Tag(OBJECT_TAG)],
    Discriminator(
        _partitioner_form,
        custom_error_type="partitioner_form",
        custom_error_message="must be a name or {'name': str, 'options': {...}}",
    ),
]
"""A catalog partitioner: its name, or ``{"name", "options"}``."""


class CompileSpecValue(PlanPart):
    """One ExecuTorch CompileSpec; its value travels as base64."""

    what: ClassVar[str] = "a compile spec"
    key: str = Field(min_length=1, description="The compile spec key.")
    value_b64: Base64Text = Field(
        default="",
        description="The compile spec value bytes, base64-encoded (standard alphabet).",
        # In the schema only: Base64Text's validator checks (and words) it, padding included.
        json_schema_extra={"pattern": r"^[A-Za-z0-9+/]*={0,2}$"},
    )

    def value(self) -> bytes:
        """The decoded compile spec value."""
        return base64.b64decode(self.value_b64, validate=True)


class DelegateTarget(PlanPart):
    """A whole-graph DelegationSpec: every operator goes to one registered backend."""

    what: ClassVar[str] = "a delegate"
    backend_id: str = Field(
        min_length=1,
        description="Class name of a registered BackendDetails, e.g. XnnpackBackend "
        "(GET /v1/backends lists them; an unknown one is answered 422).",
    )
    compile_specs: FailFastList[CompileSpecValue] = Field(
        default_factory=list, description="Compile specs handed to the backend's preprocess."
    )


class CalibrationTensor(PlanPart):
    """One calibration input tensor: data (nested lists of numbers) of the given shape."""

    what: ClassVar[str] = "a tensor"
    dtype: str = Field(default="float32", description="A torch dtype name, e.g. float32.")
    shape: FailFastList[Annotated[StrictInt, Field(ge=0)]] = Field(
        description="The tensor's sizes."
    )
    data: JsonValue = Field(description="The values, nested lists (or flat) of numbers.")


CalibrationSample = FailFastList[CalibrationTensor]
"""One calibration sample: a tensor per input. Every list of a plan stops at its first bad
item (``fail_fast``): pydantic would report every one, ~1 KB each."""

MAX_PLAN_METHODS = 256
"""Most method entries a plan may hold (a program has at most 64 methods)."""


class TargetSpec(PlanPart):
    """How a method is lowered: catalog partitioners, a whole-graph delegate, or neither
    ({}: portable operators); optionally quantized first."""

    what: ClassVar[str] = "a target"
    partitioners: FailFastList[PartitionerItem] = Field(
        default_factory=list,
        description="Catalog partitioners, tried in order (a name or {name, options}).",
    )
    delegate: DelegateTarget | None = Field(
        default=None, description="A whole-graph DelegationSpec; not with partitioners."
    )
    quantize: str | None = Field(
        default=None,
        min_length=1,
        description="A quantization recipe of the catalog, e.g. "
        "xnnpack_pt2e_int8_dynamic_per_channel.",
    )
    calibration: Annotated[FailFastList[CalibrationSample], Field(min_length=1)] | None = Field(
        default=None,
        description="Calibration samples for quantize: a list of input lists, each tensor "
        "{dtype, shape, data}; default: the program's example inputs.",
    )

    @model_validator(mode="after")
    def _one_way(self) -> TargetSpec:
        if {"partitioners", "delegate"} <= self.model_fields_set:
            raise PydanticCustomError(
                "target_form", "give either 'partitioners' or 'delegate', not both"
            )
        return self

    @property
    def delegated(self) -> bool:
        """Whether anything of the method goes to a backend (else: portable operators)."""
        return bool(self.partitioners) or self.delegate is not None

    def partitioner_specs(self) -> list[PartitionerSpec]:
        """:attr:`partitioners` with each bare name as a :class:`PartitionerSpec`."""
        return [PartitionerSpec(name=p) if isinstance(p, str) else p for p in self.partitioners]


class VerifySpec(PlanPart):
    """Tolerances of the numerics check of every artifact."""

    what: ClassVar[str] = "verify"
    rtol: Number = Field(
        default=DEFAULT_VERIFY_RTOL,
        gt=0,
        description="fp32 methods pass when max |a - b| / max |b| is at most this "
        "(unset, a half-precision method's limit is ten epsilons of its format).",
    )
    min_sqnr_db: Number = Field(
        default=DEFAULT_VERIFY_MIN_SQNR_DB,
        description="Quantized methods pass when their SQNR in dB is at least this.",
    )


ConstantName = Annotated[str, Field(pattern=f"^{METHOD_NAME_PATTERN}$")]
ConstantValue = StrictBool | StrictInt | Number | Annotated[list[StrictInt], Field(max_length=256)]
"""What a constant method answers: a boolean, an integer, a number or a list of integers."""


class PlanSpec(PlanPart):
    """A lowering plan: a target per method and/or one for "all" (a method entry
    overrides "all"; a method named by neither is not delegated), plus program-wide
    options."""

    what: ClassVar[str] = "a plan"
    methods: Annotated[dict[str, TargetSpec], at_most_entries(MAX_PLAN_METHODS)] | None = Field(
        default=None, description="The target of each named method of the program."
    )
    all: TargetSpec | None = Field(
        default=None, description="The target of every method without its own entry."
    )
    share_mutable_buffers: StrictBool = Field(
        default=False,
        description="true plans each mutable buffer once for the whole program (upstream "
        "MemoryPlanningPass(share_mutable_buffers=True)), so every method of one loaded "
        "program addresses the same state, e.g. prefill writes the KV cache decode reads. "
        "Buffers with a non-zero initial value keep it in the .pte and get it back whenever "
        "a method is loaded: load every method before running any.",
    )
    constant_methods: dict[ConstantName, ConstantValue] | None = Field(
        default=None,
        max_length=64,
        description="methods without inputs that answer a fixed value, added to the program "
        "as upstream to_edge(constant_methods=...) adds them: the metadata ExecuTorch's LLM "
        'runner reads, e.g. {"get_max_seq_len": 128, "get_bos_id": 1, "get_eos_ids": [2], '
        '"use_kv_cache": true}; with a forward method and get_max_seq_len the artifact '
        'describes itself as a language model ("generation"). A name follows the method-name '
        "rule and is not one of the program's methods.",
    )
    verify: VerifySpec | None = Field(
        default=None,
        description="tolerances of the numerics check that runs every compiled method in the "
        "ExecuTorch runtime on the program's example inputs and compares it with the "
        "exported program: an fp32 method passes when max |a-b| / max |b| is at most rtol, "
        "a quantized method when its SQNR is at least min_sqnr_db.",
    )

    per_method: ClassVar[tuple[str, ...]] = ("methods", "all")
    """The keys holding targets; every other key is a program-wide option."""

    @classmethod
    def program_wide(cls) -> dict[str, FieldInfo]:
        """The program-wide options (every key but the targets), in declaration order."""
        return {k: f for k, f in cls.model_fields.items() if k not in cls.per_method}

    def target_of(self, method: str) -> TargetSpec:
        """The target of ``method``: its own entry, else ``all``, else ``{}`` (portable)."""
        own = (self.methods or {}).get(method)
        return own if own is not None else self.all or TargetSpec()

    @property
    def tolerances(self) -> VerifySpec:
        """``verify`` with the defaults of what it leaves out."""
        return self.verify or VerifySpec()


def _means_absent(field: FieldInfo, value: JsonValue) -> bool:
    """Whether ``value`` of a plan key says the same as leaving the key out."""
    default = field.get_default(call_default_factory=True)
    return value is None or value == {} or (default is not PydanticUndefined and value == default)


def canonical_plan(plan: PlanSpec) -> tuple[JsonObject, str]:
    """The plan's JSON as written (numbers of ``verify`` as floats), without keys that mean
    the same as leaving them out (null, ``{}`` or the default, e.g. ``share_mutable_buffers``
    false), and the sha256 of its sorted-key JSON: the key under which a compiled artifact is
    reused, so this form must not change."""
    written = plan.model_dump(mode="json", exclude_unset=True)
    fields = PlanSpec.model_fields
    canonical = {k: v for k, v in written.items() if not _means_absent(fields[k], v)}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return canonical, hashlib.sha256(text.encode()).hexdigest()
