"""The compile-only ``ethos-u`` partitioner entry (upstream ``EthosUPartitioner``).

``EthosUBackend.preprocess`` lowers each partition to TOSA (``tosa-tools``' serialiser) and
compiles it with Vela (``ethos-u-vela``) to an Ethos-U command stream: Python and native
extensions, no executable, files only in a temporary directory. *Executing* it needs an Arm
Ethos-U NPU driven by ExecuTorch's Arm runtime, which the pip runtime does not ship:
:meth:`EthosUEntry.can_execute` is False here, the numerics check reports such a method
``not_executable`` and the runtime refuses to load it.

Ethos-U computes in integers only: the entry lowers graphs quantized by the
:data:`ETHOS_U_RECIPE` recipe, whose quantize/dequantize operators at the edges stay outside
the delegate on the portable kernels. A float program is refused, naming the recipe.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pteforge.backends.entry import PartitionerEntry
from pteforge.backends.options import EthosUOptions
from pteforge.contracts.plan import PartitionerSpec

if TYPE_CHECKING:
    from executorch.exir.backend.partitioner import Partitioner

ETHOS_U_BACKEND_ID = "EthosUBackend"
ETHOS_U_RECIPE = "ethos_u_int8_static_per_channel"

FLOAT_REFUSAL = (
    f"the ethos-u entry lowers int8 programs only (Ethos-U NPUs compute in integers): add "
    f'"quantize": "{ETHOS_U_RECIPE}" to this method\'s plan target'
)


class EthosUEntry(PartitionerEntry[EthosUOptions]):
    """Compiles an int8 graph with Vela for an Arm Ethos-U NPU; compile-only here."""

    options_model = EthosUOptions
    name = "ethos-u"
    backend_id = ETHOS_U_BACKEND_ID
    required_recipe: ClassVar[str | None] = ETHOS_U_RECIPE
    description = (
        "EthosUPartitioner: lowers an int8 graph to TOSA and compiles it with Vela for an "
        "Arm Ethos-U55/U65/U85 NPU (option target, default ethos-u55-128). Quantize with "
        f"the {ETHOS_U_RECIPE} recipe; float programs are refused. Compile-only here: the "
        "ExecuTorch runtime installed from pip has no Ethos-U backend and this host no NPU, "
        "so its methods cannot run on this host."
    )

    def build_partitioner(self, options: EthosUOptions) -> Partitioner:
        """An ``EthosUPartitioner`` for ``options.target`` that refuses float programs."""
        from executorch.backends.arm.ethosu import EthosUPartitioner

        from pteforge.backends.support import QuantizedOnly

        quiet_vela()
        return QuantizedOnly(EthosUPartitioner(ethos_u_compile_spec(options.target)))


def ethos_u_target(lowering: Sequence[PartitionerSpec]) -> str:
    """The target of the first ``ethos-u`` partitioner in ``lowering`` (its default where
    there is none), which the recipe quantizes for."""
    spec = next((s for s in lowering if s.name == EthosUEntry.name), None)
    return EthosUOptions.model_validate((spec.options if spec else None) or {}).target


def ethos_u_compile_spec(target: str) -> Any:
    """Upstream's ``EthosUCompileSpec`` for ``target``, with its default system and memory."""
    from executorch.backends.arm.ethosu import EthosUCompileSpec

    return EthosUCompileSpec(target)


class _QuietVela:
    """Vela's ``main`` with its report pages (printed to stdout) kept out of the job log;
    a failed compile raises with the tail of what Vela printed."""

    def __init__(self, vela: Any) -> None:
        self.vela = vela

    def main(self, argv: list[str]) -> int:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = int(self.vela.main(argv))
        if status != 0:
            raise RuntimeError(f"Vela failed (exit {status}): {printed.getvalue()[-2000:]}")
        return status


def quiet_vela() -> None:
    """Route upstream's Vela calls through :class:`_QuietVela` (idempotent)."""
    from executorch.backends.arm import arm_vela

    if not isinstance(arm_vela.vela, _QuietVela):
        arm_vela.vela = _QuietVela(arm_vela.vela)
