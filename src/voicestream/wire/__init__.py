"""The contracts on the wire, written once: standard library only, imported by every side.

- `bidi`: the bidirectional session and POST /invocations (docs/protocol.md)
- `framing`: control frame vs audio, server-sent events, length-prefixed binary frames
- `speak`: the speak function's events and their two codecs (docs/speak.md)
- `errors`: `CodedError`, the error codes, and the one JSON error body
- `vllm_omni`: vLLM-Omni's `/v1/audio/speech/stream` (docs/vllm-omni.md), the second speech model's wire
"""
