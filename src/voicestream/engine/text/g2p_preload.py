"""Imported by the G2P fork server (see `voicestream.engine.text.g2p`), and only there: it builds the
English G2P once, so that every G2P worker forked from the server starts warm and a worker that
replaced a stopped one is ready in milliseconds."""

from voicestream.engine.text.g2p import preload

preload(("en-us",))
