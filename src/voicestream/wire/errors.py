"""One error convention for every route and every client: a stable code, a message, one body.

Every error voicestream raises on purpose is a `CodedError`: programs branch on `code` (a
stable snake_case string, listed in `ErrorCode`), people read the message. Every HTTP route
answers a refused request with the same JSON object that the bidi session sends as its
`error` control frame, so one reader (`read_error_body`) serves every client:

    {"type": "error", "code": "invalid_speed", "message": "speed must be ...", "request_id": "r1"}

(`request_id` only where a request is concerned.) Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Final


class ErrorCode(StrEnum):
    """Stable error codes: clients branch on these, never on the message text."""

    # a message or body that cannot be read (bidi session, POST /invocations, POST /speak)
    INVALID_UTF8 = "invalid_utf8"
    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    UNKNOWN_TYPE = "unknown_type"
    UNKNOWN_FIELD = "unknown_field"
    MESSAGE_TOO_LARGE = "message_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    REQUEST_TIMEOUT = "request_timeout"
    # who may call: a local server's Host allow-list, a web page's Origin (voicestream.origins)
    MISDIRECTED_REQUEST = "misdirected_request"
    FORBIDDEN_ORIGIN = "forbidden_origin"
    # what to speak and how
    MISSING_TEXT = "missing_text"
    EMPTY_TEXT = "empty_text"
    TEXT_TOO_LONG = "text_too_long"
    TEXT_TOO_COMPLEX = "text_too_complex"
    UNKNOWN_VOICE = "unknown_voice"
    INVALID_SPEED = "invalid_speed"
    INVALID_FORMAT = "invalid_format"
    INVALID_SAMPLE_RATE = "invalid_sample_rate"
    INVALID_TRANSPORT = "invalid_transport"
    INVALID_REQUEST_ID = "invalid_request_id"
    DUPLICATE_REQUEST_ID = "duplicate_request_id"
    UNSUPPORTED_LANGUAGE = "unsupported_language"
    INVALID_REQUEST = "invalid_request"
    INVALID_LEXICON = "invalid_lexicon"  # a malformed or oversized `lexicon`
    INVALID_PHONEMES = "invalid_phonemes"  # a symbol outside Kokoro's phoneme vocabulary
    MODEL_NOT_FOUND = "model_not_found"  # the OpenAI-compatible route's `model`
    # the speak function's request fields
    MISSING_INPUT = "missing_input"
    INVALID_PROMPT = "invalid_prompt"
    EMPTY_PROMPT = "empty_prompt"
    PROMPT_TOO_LONG = "prompt_too_long"
    INVALID_MODE = "invalid_mode"
    INVALID_PACE = "invalid_pace"
    INVALID_VOICE = "invalid_voice"
    # limits and availability
    QUEUE_FULL = "queue_full"
    SESSION_TIMEOUT = "session_timeout"
    IDLE_TIMEOUT = "idle_timeout"
    SERVER_BUSY = "server_busy"
    SLOW_CONSUMER = "slow_consumer"  # the client reads audio slower than real time
    NOT_READY = "not_ready"
    # failures while speaking (the speak function's stream names which part failed)
    SYNTHESIS_FAILED = "synthesis_failed"
    MODEL_ERROR = "model_error"
    TTS_UNAVAILABLE = "tts_unavailable"
    TTS_ERROR = "tts_error"
    TIMEOUT = "timeout"
    HTTP_ERROR = "http_error"
    INTERNAL_ERROR = "internal_error"


@dataclass(frozen=True, slots=True)
class ErrorMessage:
    """The one error body: the bidi session's `error` control frame and every route's 4xx/5xx."""

    code: str
    message: str
    request_id: str | None = None
    type: ClassVar[str] = "error"

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type, "code": self.code, "message": self.message}
        if self.request_id is not None:
            body["request_id"] = self.request_id
        return body


def read_error_body(body: Any) -> ErrorMessage | None:
    """The error a JSON body carries (the one error body above), or None when it is not one."""
    if not isinstance(body, dict) or body.get("type") != ErrorMessage.type:
        return None
    code, message, request_id = body.get("code"), body.get("message"), body.get("request_id")
    if not isinstance(code, str) or not isinstance(message, str):
        return None
    return ErrorMessage(code, message, request_id if isinstance(request_id, str) else None)


class CodedError(Exception):
    """Base of every error voicestream raises on purpose.

    `code` is stable (an `ErrorCode` value, or a subclass's own); `status` is the HTTP status it
    answers a request with; `request_id` names the request concerned, when there is one.
    Subclasses set `code` and `status` as class attributes; an instance may override both.
    """

    code: str = ErrorCode.INTERNAL_ERROR
    status: int = 500

    def __init__(
        self, message: str, *, code: str | None = None, status: int | None = None, request_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.request_id = request_id

    def to_message(self) -> ErrorMessage:
        return ErrorMessage(code=str(self.code), message=self.message, request_id=self.request_id)

    def body(self) -> dict[str, Any]:
        return self.to_message().body()


# Statuses other than 400 for a refused request; everything else a client sent wrong is a 400.
_STATUS_OF: dict[str, int] = {
    ErrorCode.MESSAGE_TOO_LARGE: 413,
    ErrorCode.TEXT_TOO_LONG: 413,
    ErrorCode.TEXT_TOO_COMPLEX: 413,
    ErrorCode.REQUEST_TIMEOUT: 408,
    ErrorCode.PROMPT_TOO_LONG: 413,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
}


class ProtocolError(CodedError):
    """What the other side sent cannot be accepted: an `error` frame in a session, a 4xx on HTTP."""

    code = ErrorCode.INVALID_REQUEST
    status = 400

    def __init__(self, code: str, message: str, request_id: str | None = None, *, status: int | None = None) -> None:
        super().__init__(message, code=code, status=status or _STATUS_OF.get(code, 400), request_id=request_id)


# What a client is told of a failure on our side, whatever the exception said: its text can
# hold model paths, ARNs, endpoint names. The detail goes to the log only (`public_error`).
FAILURE_MESSAGES: Final[dict[str, str]] = {
    ErrorCode.SYNTHESIS_FAILED: "speech synthesis failed (the server's log has the details)",
    ErrorCode.INTERNAL_ERROR: "internal error (the log has the details)",
    ErrorCode.SERVER_BUSY: "the server is busy: try again later",
    ErrorCode.MODEL_ERROR: "the language model failed (the speak function's log has the details)",
    ErrorCode.TTS_UNAVAILABLE: "the speech server is unavailable (the speak function's log has the details)",
    ErrorCode.TTS_ERROR: "the speech server failed mid-reply (the speak function's log has the details)",
}


def public_error(
    error: BaseException, *, code: str = ErrorCode.SYNTHESIS_FAILED, request_id: str | None = None
) -> CodedError:
    """What a client may be told of `error`: a refusal of what it sent (a `CodedError` under
    500, whose message is ours) as it is; anything else as the fixed message of its code (`code`
    for an exception that has none). Log `error` itself where it is caught."""
    if isinstance(error, CodedError):
        if error.status < 500:
            return error
        code, status = str(error.code), error.status
    else:
        status = 500
    message = FAILURE_MESSAGES.get(code, FAILURE_MESSAGES[ErrorCode.INTERNAL_ERROR])
    return CodedError(message, code=code, status=status, request_id=request_id)
