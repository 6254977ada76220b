"""Checking a validated plan against a program's methods and the backend catalog, up front.

One check for the library (``compile_programs``), ``pteforge compile`` and the service
(``POST /v1/compile-jobs`` answers 422 before queueing): every method it names exists, every
catalog name, option, backend id and recipe a plan uses exists and fits, its calibration
tensors can be built, and each refusal names the field as it was
written (``all.partitioners[0]``, not the method the ``all`` target would have reached) and
calls the thing by what it is (a partitioner, a backend id, a quantization recipe).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pteforge.backends import BackendCatalog
from pteforge.backends.catalog import EntryKind
from pteforge.backends.entry import DelegateEntryBase, PartitionerEntry, QuantizerEntryBase
from pteforge.backends.errors import BackendCatalogError, UnknownBackendError
from pteforge.contracts.plan import PlanSpec, TargetSpec
from pteforge.manager.errors import PlanError
from pteforge.manager.plan import check_calibration, resolve_targets


def check_plan(plan: PlanSpec, methods: Sequence[str], catalog: BackendCatalog) -> None:
    """Raise ``PlanError`` (or ``UnknownMethodError``) for the first thing ``plan`` gets wrong."""
    resolve_targets(plan, methods)  # methods the program lacks
    written = list(_written_targets(plan))
    for where, target in written:
        check_calibration(where, target)
    for where, target in written:
        _check_target(where, target, catalog)


def _written_targets(plan: PlanSpec) -> Iterator[tuple[str, TargetSpec]]:
    if plan.all is not None:
        yield "all", plan.all
    for method, target in (plan.methods or {}).items():
        yield f"methods.{method}", target


def _check_target(where: str, target: TargetSpec, catalog: BackendCatalog) -> None:
    for index, spec in enumerate(target.partitioner_specs()):
        field = f"{where}.partitioners[{index}]"
        entry = _entry(catalog, spec.name, EntryKind.PARTITIONER, field)
        assert isinstance(entry, PartitionerEntry)
        try:
            entry.validate(dict(spec.options or {}))
        except (BackendCatalogError, ValueError) as exc:
            raise PlanError(f"{field}.options", str(exc)) from None
    if target.delegate is not None:
        _check_delegate(where, target.delegate.model_dump(mode="json"), catalog)
    if target.quantize is not None:
        entry = _entry(catalog, target.quantize, EntryKind.QUANTIZER, f"{where}.quantize")
        assert isinstance(entry, QuantizerEntryBase)
        _check_quantized_lowering(where, target, catalog)


def _check_quantized_lowering(where: str, target: TargetSpec, catalog: BackendCatalog) -> None:
    """A target that quantizes uses no partitioner that refuses quantized programs, nor one
    that needs another recipe (lowering would fail after quantizing and exporting, minutes
    into a large model's job)."""
    for index, spec in enumerate(target.partitioner_specs()):
        entry = catalog.entries[spec.name]
        if not isinstance(entry, PartitionerEntry):
            continue
        field = f"{where}.partitioners[{index}]"
        if entry.quantized_refusal:
            raise PlanError(
                f"{where}.quantize", f"{field} is {spec.name!r}: {entry.quantized_refusal}"
            )
        wanted = entry.required_recipe
        if wanted is not None and target.quantize != wanted:
            raise PlanError(
                f"{where}.quantize",
                f"{field} is {spec.name!r}, which lowers graphs of the {wanted!r} recipe "
                f"only; quantize with {wanted!r} instead of {target.quantize!r}",
            )


def _check_delegate(where: str, options: dict[str, object], catalog: BackendCatalog) -> None:
    entry = _entry(catalog, "delegate", EntryKind.DELEGATE, f"{where}.delegate")
    assert isinstance(entry, DelegateEntryBase)
    try:
        entry.delegation_spec(options)
    except UnknownBackendError as exc:
        known = ", ".join(exc.known)
        raise PlanError(
            f"{where}.delegate.backend_id",
            f"unknown backend id {exc.name!r}; registered backend ids: {known}",
        ) from None
    except (BackendCatalogError, ValueError) as exc:
        raise PlanError(f"{where}.delegate", str(exc)) from None


_WHAT = {
    EntryKind.PARTITIONER: "partitioner",
    EntryKind.QUANTIZER: "quantization recipe",
    EntryKind.DELEGATE: "delegate entry",
}


def _entry(catalog: BackendCatalog, name: str, kind: EntryKind, field: str) -> object:
    """The catalog entry ``name`` if it is of ``kind``; else a ``PlanError`` on ``field``."""
    what = _WHAT[kind]
    known = ", ".join(catalog.names_of_kind(kind))
    entry = catalog.entries.get(name)
    if entry is None:
        raise PlanError(field, f"unknown {what} {name!r}; {what}s: {known}")
    if entry.kind != kind:
        raise PlanError(field, f"{name!r} is a {entry.kind.value} entry, not a {what}; "
                        f"{what}s: {known}")  # fmt: skip
    return entry
