"""The streaming clients a user runs: `voicestream speak` (text or piped tokens → one bidi
session) and `voicestream call` (the deployed speak function URL, SigV4-signed)."""
