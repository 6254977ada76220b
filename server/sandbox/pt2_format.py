"""Facts about torch 2.13's pt2 archive layout, restated without importing torch.

``tests/sandbox`` checks these against ``torch.export.pt2_archive.constants`` so a torch upgrade
that moves them fails loudly instead of silently widening the allowlist.
"""

from __future__ import annotations

import re

from pteforge.contracts.saved_files import SAVE_CALL

ARCHIVE_FORMAT_PATH = "archive_format"
ARCHIVE_FORMAT_VALUE = "pt2"
ARCHIVE_VERSION_PATH = "archive_version"
ARCHIVE_VERSION_VALUE = "0"
MODELS_FILENAME_FORMAT = "models/{}.json"
WEIGHTS_DIR = "data/weights/"
CONSTANTS_DIR = "data/constants/"
WEIGHTS_CONFIG_FILENAME_FORMAT = "data/weights/{}_weights_config.json"
CONSTANTS_CONFIG_FILENAME_FORMAT = "data/constants/{}_constants_config.json"
SAMPLE_INPUTS_FILENAME_FORMAT = "data/sample_inputs/{}.pt"
WEIGHT_FILENAME_PREFIX = "weight_"
TENSOR_CONSTANT_FILENAME_PREFIX = "tensor_"
CUSTOM_OBJ_FILENAME_PREFIX = "custom_obj_"
OPAQUE_OBJ_FILENAME_PREFIX = "opaque_obj_"
AOTINDUCTOR_DIR = "data/aotinductor/"

METHOD_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
_FIXED_ENTRIES = r"archive_format|archive_version|byteorder|\.data/version|\.data/serialization_id"
ALLOWED_ENTRY = re.compile(
    rf"^(?:{_FIXED_ENTRIES}"
    rf"|models/(?P<model>{METHOD_NAME})\.json"
    rf"|data/weights/{METHOD_NAME}_weights_config\.json"
    rf"|data/constants/{METHOD_NAME}_constants_config\.json"
    rf"|data/sample_inputs/{METHOD_NAME}\.pt"
    r"|data/weights/weight_\d{1,9}"
    r"|data/constants/tensor_\d{1,9}"
    r"|extra/[A-Za-z0-9_.\-]{1,128})$"
)
# Names that are known to lead to code execution get a precise reason instead of "unknown":
# (pattern, reason, message), the first pattern found in a name decides.
_DANGEROUS = (
    (
        r"^data/(aotinductor|mtia)/|\.(so|dll|dylib|cpp|o)$",
        "native_code",
        "AOTInductor or native code entries are not accepted (an AOTInductor package, from "
        "aoti_compile_and_package, is compiled code: upload the torch.export.save archive "
        "of the program instead)",
    ),
    (
        r"^data/constants/(custom_obj|opaque_obj)_",
        "custom_object",
        "custom (torchbind) or opaque object constants are pickles and are not accepted",
    ),
    (
        r"^data/(weights|constants)/[^/]+\.pt$",
        "pickle_payload",
        "legacy pickled weights or constants are not accepted",
    ),
    (
        r"^data/executorch/|^xl_model_weights/",
        "unsupported_entry",
        "this archive section is not accepted",
    ),
)
DANGEROUS_ENTRIES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(pattern), reason, message) for pattern, reason, message in _DANGEROUS
)

SAVE_AGAIN = (
    f"export it and save it with {SAVE_CALL} under the torch release the server runs (a "
    "job's toolchain names it)"
)
VERSION_MISMATCH = (
    ": the archive was written by another torch release's torch.export.save; "
    + SAVE_AGAIN.replace("export it and save it", "save it again")
)


# schema.ScalarType code -> (torch dtype name, element size in bytes)
SCALAR_TYPES: dict[int, tuple[str, int]] = {
    1: ("uint8", 1),
    2: ("int8", 1),
    3: ("int16", 2),
    4: ("int32", 4),
    5: ("int64", 8),
    6: ("float16", 2),
    7: ("float32", 4),
    8: ("float64", 8),
    9: ("complex32", 4),
    10: ("complex64", 8),
    11: ("complex128", 16),
    12: ("bool", 1),
    13: ("bfloat16", 2),
    28: ("uint16", 2),
    29: ("float8_e4m3fn", 1),
    30: ("float8_e5m2", 1),
    31: ("float8_e4m3fnuz", 1),
    32: ("float8_e5m2fnuz", 1),
    33: ("float8_e8m0fnu", 1),
    34: ("uint32", 4),
    35: ("uint64", 8),
}
LAYOUT_STRIDED = 7
