"""voicestream inside other frameworks and front ends: the Gradio streaming client
(`gradio_app`, its core `speech_stream`, its numbers `stream_metrics`)."""
