"""Streaming inside a sentence, shared by the runtimes: the decoder window plan and its pacing."""
