"""Status codes to exceptions, in one place.

The code -> name tables come from the headers' own `#define`s (ACLNN_ERR_* and
ACL_ERROR_*), so a code added to a header is named here without an edit.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

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


def recent_error_message() -> str:
    """The calling thread's pending messages, newest first; reading clears them."""
    ffi, text = _library.ffi, _library.lib.aclGetRecentErrMsg()
    return "" if text == ffi.NULL else ffi.string(text).decode("utf-8", "replace").strip()


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
