"""Plugins for the voice-agent frameworks (docs/integrations.md), each behind its own extra:

- `voicestream.integrations.pipecat`: `VoicestreamTTSService` (pip install voicestream[pipecat])
- `voicestream.integrations.livekit`: `TTS` for LiveKit Agents (pip install voicestream[livekit])

Both speak over one persistent bidi session (a local server's WebSocket or a SageMaker endpoint)
with voicestream's sentence chunker and the server's word timings.
"""
