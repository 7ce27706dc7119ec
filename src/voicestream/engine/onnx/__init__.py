"""The int8 ONNX runtime: the official graph cut in three (graphs.py), run over windows (runtime.py)."""
