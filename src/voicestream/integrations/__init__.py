"""voicestream inside other frameworks and front ends (docs/integrations.md), each behind its own extra:

- `voicestream.integrations.pipecat`: `VoicestreamTTSService` (pip install voicestream[pipecat])
- `voicestream.integrations.livekit`: `TTS` for LiveKit Agents (pip install voicestream[livekit])
- `voicestream.integrations.gradio_app`: the Gradio streaming client (pip install voicestream[gradio]),
  its core `speech_stream` and its numbers `stream_metrics`

The plugins speak over one persistent session (a local server's WebSocket or a SageMaker
endpoint) with voicestream's sentence chunker and the server's word timings.
"""
