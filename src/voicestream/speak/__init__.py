"""The speak function's core: text sources, the bidi/batch speak loops, their events, the app.

Import the submodules directly (`voicestream.speak.run`, `.sources`, `.app`): this package
keeps its own import light, as the Lambda function's cold start pays for every import.
"""
