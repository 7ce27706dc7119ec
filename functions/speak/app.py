"""The speak function's Lambda entry: the app, configured from the environment.

run.sh serves it with uvicorn behind the Lambda Web Adapter; everything it does lives in
`voicestream.speak` (see docs/speak.md).
"""

from voicestream.speak.app import create_app

app = create_app()
