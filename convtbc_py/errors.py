"""Status codes to exceptions, in one place.

The code -> name tables come from the headers' own `#define`s (ACLNN_ERR_* and
ACL_ERROR_*), so a code added to a header is named here without an edit.

Exceptions carry CANN's status, its name and CANN's message (`status`,
`name`, `message`). The `[PID: n] yyyy-mm-dd-hh:mm:ss.mmm.uuu` part of each
message is left out: it says when and where, which the library's log
(ASCEND_GLOBAL_LOG_LEVEL) keeps, and it would make every text unique.

An operator called from a Python function reports its argument errors as
`AclnnTypeError` / `AclnnValueError` (see `in_python_terms`): still
AclnnErrors with CANN's status, and also TypeError / ValueError, whose text
speaks of the Python arguments.
"""

from __future__ import annotations

import re
from typing import Dict, Mapping, Optional, Type

from . import _library

# The headers' values; reading them loads no library.
CONSTANTS = _library.constants()


def _names(prefix: str) -> Dict[int, str]:
    # Success has several aliases (ACL_SUCCESS, ACL_ERROR_NONE) and is never raised.
    return {value: name for name, value in CONSTANTS.items() if name.startswith(prefix) and value != 0}


ACLNN_STATUS_NAMES: Dict[int, str] = _names("ACLNN_ERR_")
ACL_ERROR_NAMES: Dict[int, str] = _names("ACL_ERROR_")


class ConvTbcError(Exception):
    """A non-success status from libconvtbc (base of AclnnError and AclError)."""

    _names: Dict[int, str] = {}

    def __init__(self, status: int, name: Optional[str] = None, message: str = "") -> None:
        if name is None:
            name = self._names.get(status) or ACLNN_STATUS_NAMES.get(status) or ACL_ERROR_NAMES.get(status, "UNKNOWN")
        # Passing all three to Exception keeps the instance picklable.
        super().__init__(status, name, message)
        self.status = int(status)
        self.name = name
        self.message = message

    def __str__(self) -> str:
        return f"{self.name} ({self.status}): {self.message or '(no message)'}"


class AclnnError(ConvTbcError):
    """An aclnn status (ACLNN_ERR_*), e.g. a rejected argument of an operator."""

    _names = ACLNN_STATUS_NAMES


class AclError(ConvTbcError):
    """An ACL runtime status (ACL_ERROR_*), e.g. a call before aclInit."""

    _names = ACL_ERROR_NAMES


class AclnnArgumentError(AclnnError):
    """An operator refused an argument of the Python function that called it.

    `argument` is the Python parameter (e.g. "grad_output", where CANN says
    "self"); `status`, `name` and `message` stay CANN's. str() is the
    explanation in the Python function's terms, then CANN's status.
    Raised as one of its two subclasses.
    """

    def __init__(self, status: int, name: Optional[str] = None, message: str = "",
                 argument: str = "", explanation: str = "") -> None:
        super().__init__(status, name, message)
        self.args = (status, self.name, message, argument, explanation)  # so that it pickles
        self.argument = argument
        self.explanation = explanation

    def __str__(self) -> str:
        return f"{self.explanation} [{self.name} ({self.status})]"


class AclnnTypeError(AclnnArgumentError, TypeError):
    """A refused dtype, or None where the operator needs an array."""


class AclnnValueError(AclnnArgumentError, ValueError):
    """A refused shape or value (pad, cube_math_type, mismatched dims)."""


# "[PID: 55172] 2025-09-13-05:28:15.526.256 ", as CANN stamps each message.
_STAMP = re.compile(r"\[PID: \d+\] \d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3} ")


def recent_error_message() -> str:
    """The calling thread's pending messages, newest first, one a line,
    without their PID and time stamps; reading clears them."""
    ffi, text = _library.ffi, _library.lib.aclGetRecentErrMsg()
    if text == ffi.NULL:
        return ""
    return _STAMP.sub("", ffi.string(text).decode("utf-8", "replace")).strip()


def check(status: int, unknown: Type[ConvTbcError] = AclnnError) -> None:
    """Raise the exception for `status` unless it is success.

    The class follows the code's family; a code in neither header table is
    raised as `unknown` (callers pass AclError for runtime calls).
    """
    if status == 0:
        return
    if status in ACLNN_STATUS_NAMES:
        cls: Type[ConvTbcError] = AclnnError
    elif status in ACL_ERROR_NAMES:
        cls = AclError
    else:
        cls = unknown
    raise cls(status, message=recent_error_message())


def check_created(handle: object, status: int = CONSTANTS["ACLNN_ERR_PARAM_INVALID"]) -> None:
    """Raise for a constructor that signals failure by returning NULL.

    `aclCreateTensor` and friends reject bad arguments (NULL dims with a
    non-zero count, more dims than a tensor holds) this way; the status reported is
    ACLNN_ERR_PARAM_INVALID, the code the operator itself would give.
    """
    if handle == _library.ffi.NULL:
        check(status)


# ---------------------------------------------------------------- Python terms

# CANN's messages name dtypes as DT_*; a Python user knows numpy's names.
# Most are the DT_ name in lower case; these are not.
_NUMPY_DTYPE_NAMES: Dict[str, str] = {"DT_FLOAT": "float32", "DT_DOUBLE": "float64", "DT_BF16": "bfloat16"}
_DT_NAME = re.compile(r"\bDT_\w+")
_DTYPE_REFUSED = re.compile(
    r"tensor (\w+) not implemented for (DT_\w+), should be in dtype support list \[([^\]]*)\](?: on (\w+))?")
_NULL_ARGUMENT = re.compile(r"got null for argument (\w+)")
# "<id>: <api>: <text>": the text is what the operator says about the arguments.
_TEXT = re.compile(r"^\w+: \w+: ")
_WORD = re.compile(r"\b\w+\b")


def numpy_dtype_name(cann_name: str) -> str:
    """numpy's name for a dtype named as CANN's messages do ("DT_FLOAT" -> "float32")."""
    return _NUMPY_DTYPE_NAMES.get(cann_name, cann_name[3:].lower() if cann_name.startswith("DT_") else cann_name)


def in_python_terms(error: AclnnError, function: str, python_names: Mapping[str, str],
                    usage: Optional[Mapping[str, str]] = None) -> AclnnError:
    """The exception a Python function raises for `error`, an AclnnError of
    the operator it called.

    When CANN's message is about an argument (its first line names one of
    `python_names`' keys, e.g. "self"), the result is an AclnnTypeError (a
    dtype, a missing array) or an AclnnValueError (anything else) whose text
    uses the Python names (`python_names` maps CANN's to Python's) and numpy's
    dtype names, says which dtypes are accepted with a conversion hint, and
    ends with `usage[argument]` if given (value errors only); status, name
    and message stay CANN's. Otherwise
    `error` itself is returned.
    """
    first = error.message.splitlines()[0] if error.message else ""
    text = _TEXT.sub("", first)
    named = [word for word in _WORD.findall(text) if word in python_names]
    if not named or error.status not in ACLNN_STATUS_NAMES:
        return error
    argument = python_names[named[0]]
    in_python = _WORD.sub(lambda m: python_names.get(m.group(0), m.group(0)), text)
    in_python = _DT_NAME.sub(lambda m: numpy_dtype_name(m.group(0)), in_python)

    refused = _DTYPE_REFUSED.search(text)
    if refused is not None:
        argument = python_names.get(refused.group(1), refused.group(1))
        accepted = [numpy_dtype_name(n.strip()) for n in refused.group(3).split(",") if n.strip()]
        where = f" on {refused.group(4)}" if refused.group(4) else ""
        explanation = (f"{function}: {argument} has dtype {numpy_dtype_name(refused.group(2))}; "
                       f"{function} accepts {', '.join(accepted) or 'none'}{where}")
        if accepted:
            target = "ml_dtypes.bfloat16" if accepted[0] == "bfloat16" else f"np.{accepted[0]}"
            explanation += f": pass e.g. {argument}.astype({target})"
        return AclnnTypeError(error.status, error.name, error.message, argument, explanation)
    null = _NULL_ARGUMENT.search(text)
    if null is not None:
        argument = python_names.get(null.group(1), null.group(1))
        explanation = f"{function}: {argument} is None, and {function} needs an array for it"
        return AclnnTypeError(error.status, error.name, error.message, argument, explanation)
    explanation = f"{function}: {in_python.rstrip('.')}"
    if usage and argument in usage:
        explanation += f" ({usage[argument]})"
    return AclnnValueError(error.status, error.name, error.message, argument, explanation)
