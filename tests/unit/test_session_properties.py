"""Property: any JSON value in any field of any message gets a coded error or success, never
`internal_error`, and the session stays usable.

Hypothesis writes messages of every type (and no type) whose fields hold any JSON value: null,
booleans, integers no float can hold, NaN and infinities, strings, arrays, objects, plus the
plausible values that make requests succeed, and extra fields. They go to the real
ServerSession over the in-memory channel, in text and binary frames. The same values go
through the POST /invocations and POST /speak parsers.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fakes import MemoryChannel, ToneEngine, started_runtime
from voicestream.kokoro_server.session import ServerSession
from voicestream.speak.request import parse_speak_request
from voicestream.wire.bidi import FORMATS, parse_invocation_request
from voicestream.wire.errors import ErrorCode, ProtocolError
from voicestream.wire.framing import parse_control_frame

BOUND_S = 20.0
CODES = {code.value for code in ErrorCode}

# Values that broke parsers before: integers no float can hold (OverflowError), NaN and the
# infinities (json.dumps writes them; a lenient peer may send them), and near misses of types.
hostile = st.sampled_from(
    [10**400, -(10**400), 2**1024, float("nan"), float("inf"), -float("inf"), True, 0, -1, "1.0", [], {}, ""]
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6,
)


any_value = st.one_of(hostile, json_values)
FIELDS = ("type", "text", "voice", "speed", "format", "request_id", "transport", "extra")

texts = st.sampled_from(["Hi.", "Hello there. How are you?", "9" * 40, "a\u0301\u0301\u0301\u0301\u0301b", "\u200bok"])
options = {
    "voice": st.sampled_from(["af_heart", "bm_george", "af_heart:0.3,af_bella:0.7", "af_bella,af_heart"]),
    "speed": st.floats(min_value=0.5, max_value=2.0),
    "format": st.sampled_from(FORMATS),
}
valid_messages = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("synthesize"), "text": texts},
        optional={**options, "request_id": st.text(min_size=1, max_size=10).filter(str.isprintable)},
    ),
    st.fixed_dictionaries({"type": st.just("config")}, optional=options),
    st.fixed_dictionaries({"text": texts}),  # the seed sample's bare text
    st.sampled_from([{"type": "cancel"}, {"type": "ping"}]),
)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    """A valid message with up to two of its fields (or new ones) set to any JSON value: so a
    hostile value reaches each field's own check, past the fields parsed before it."""
    message = dict(draw(valid_messages))
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=2, unique=True)):
        message[name] = draw(any_value)
    if message.get("type") == "close":  # close ends the session on purpose
        message["type"] = "ping"
    return message


def encode(message: dict[str, Any], binary: bool) -> str | bytes:
    text = json.dumps(message)  # allow_nan: NaN/Infinity reach the server as such
    return text.encode() if binary else text


async def converse(frames: list[tuple[dict[str, Any], bool]]) -> None:
    runtime = await started_runtime(ToneEngine(ms_per_char=1.0))
    channel = MemoryChannel()
    session = asyncio.create_task(ServerSession(runtime, channel).run())
    try:
        for message, binary in frames:
            channel.client_sends(encode(message, binary))
        # Requests are answered in order: once this one completes, every earlier one has ended.
        final = f"final-{uuid.uuid4().hex}"
        channel.client_sends(json.dumps({"type": "synthesize", "text": "Still here?", "request_id": final}))
        started: list[str] = []
        ended: set[str] = set()
        async with asyncio.timeout(BOUND_S):
            while True:
                item = await channel.from_server.get()
                assert not isinstance(item, int), f"the session closed with code {item}"
                control = parse_control_frame(item)
                if control is None:
                    continue  # audio
                kind = control["type"]
                assert kind in ("synthesis_start", "synthesis_complete", "error", "cancelled", "pong"), control
                if kind == "error":
                    assert control["code"] in CODES and control["code"] != "internal_error", control
                    assert isinstance(control["message"], str) and control["message"]
                if kind == "synthesis_start":
                    started.append(control["request_id"])
                elif kind in ("synthesis_complete", "error") and control.get("request_id") in started:
                    ended.add(control["request_id"])
                elif kind == "cancelled":
                    ended.update(control["request_ids"])
                if kind == "synthesis_complete" and control["request_id"] == final:
                    break
        assert set(started) <= ended, f"requests that started and never ended: {set(started) - ended}"
        assert runtime.stats.sessions_active == 0  # (this session was never counted: opened directly)
    finally:
        channel.client_disconnects()
        await asyncio.wait_for(session, BOUND_S)
        runtime.close()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(st.lists(st.tuples(messages(), st.booleans()), min_size=1, max_size=6))
def test_any_json_in_any_field_is_a_coded_error_or_success(frames: list[tuple[dict[str, Any], bool]]) -> None:
    asyncio.run(converse(frames))


@settings(max_examples=300, database=None)
@given(messages())
def test_any_invocation_body_parses_or_is_a_coded_error(body: dict[str, Any]) -> None:
    try:
        parse_invocation_request(json.dumps(body))
    except ProtocolError as error:
        assert error.code in CODES and 400 <= error.status < 500


SPEAK_FIELDS = ("prompt", "text", "mode", "transport", "format", "voice", "speed", "pace", "extra")
valid_speak_bodies = st.fixed_dictionaries(
    {"text": texts},
    optional={
        "mode": st.sampled_from(["bidi", "batch"]),
        "transport": st.sampled_from(["sse", "binary"]),
        "format": st.sampled_from(FORMATS),
        "voice": options["voice"],
        "speed": options["speed"],
        "pace": st.fixed_dictionaries({}, optional={"first_token_ms": st.just(100), "tokens_per_s": st.just(40)}),
    },
)


@st.composite
def speak_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body = dict(draw(valid_speak_bodies))
    for name in draw(st.lists(st.sampled_from(SPEAK_FIELDS), max_size=2, unique=True)):
        body[name] = draw(any_value)
    pace = body.get("pace")
    if isinstance(pace, dict) and draw(st.booleans()):
        body["pace"] = {**pace, draw(st.sampled_from(["first_token_ms", "tokens_per_s"])): draw(any_value)}
    return body


@settings(max_examples=300, database=None)
@given(speak_bodies())
def test_any_speak_body_parses_or_is_a_coded_error(body: dict[str, Any]) -> None:
    try:
        parse_speak_request(json.dumps(body).encode())
    except ProtocolError as error:
        assert error.code in CODES and 400 <= error.status < 500
