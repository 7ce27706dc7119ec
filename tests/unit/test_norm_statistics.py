"""The weight of the norm statistics a window carries in (engine/onnx/runtime.py): every frame
decoded so far counts once, as if one norm saw the earlier windows and this one together."""

from __future__ import annotations

import numpy as np

from voicestream.engine.onnx.runtime import NormStatistics


def test_carried_statistics_weigh_as_many_frames_as_they_were_taken_over() -> None:
    carried = NormStatistics({"carried_0_mean": np.zeros((1, 4, 1), dtype=np.float32)}, frames=36)
    assert carried.weight_against(36) == 0.5  # a window as long as everything before it
    assert carried.weight_against(12) == 0.75
    assert NormStatistics({}, frames=0).weight_against(40) == 0.0  # nothing carried: the window alone
    # The blended mean of two windows equals the mean over both spans, whatever their lengths.
    first, second = np.arange(36.0), np.arange(36.0, 96.0)
    weight = NormStatistics({}, frames=len(first)).weight_against(len(second))
    blended = weight * first.mean() + (1 - weight) * second.mean()
    assert np.isclose(blended, np.concatenate([first, second]).mean())
