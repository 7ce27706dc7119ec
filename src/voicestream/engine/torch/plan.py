"""The torch engine's streaming plan: its decoder windows and its lookahead head.

Apart from the engine (no torch import), so that the simulated hosts of the unit tests
(tests/unit/test_gapless_hosts.py) play the plan the engine ships.
"""

from __future__ import annotations

from voicestream.engine.streaming.lookahead import LookaheadPlan
from voicestream.engine.streaming.windows import WindowPlan

# One cut (torch_split.py: the whole decoder per window), so no separate frontend context: 16
# context frames cover the decoder's receptive field (14 frames each side, measured on KModel in
# tests/torch/test_torch_streaming.py) with 2 to spare. Windows double up to 144 frames, the
# ONNX plan's cap: longer windows next to shorter ones step more at their seams (docs/engine.md,
# "No carried statistics on torch").
DEFAULT_WINDOWS = WindowPlan(first=12, growth=2.0, largest=144, context=16, frontend_context=0, crossfade=2)
# A long piece is encoded head first (lookahead.py), with twice the ONNX engine's spoken head: on
# a CPU this decoder's windows gain less audio over their compute than ONNX's, and a head of 40
# tokens left the first window alone to buffer the whole piece's encoding (it grew to ~60 frames);
# 80 let several windows build that lead (docs/engine-evidence.md, "Fused generator blocks and an 80-token head").
DEFAULT_LOOKAHEAD = LookaheadPlan(spoken_tokens=80)
# Share of the audio ahead a paced window may take (pacing.py's MARGIN is the ONNX engine's).
# This decoder's windows on a CPU run closer to their break-even than ONNX's, so a run a fifth
# slower than the speed measured (a noisy 2-core host) outlasts the audio ahead: through `serve`
# gaps of up to 76 ms at 0.9; 0.8 leaves room for it, for ~4% more first audio
# (docs/engine-evidence.md, "Fused generator blocks and an 80-token head").
PACING_MARGIN = 0.8
