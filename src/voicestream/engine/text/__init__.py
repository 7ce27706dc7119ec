"""Text to phonemes: normalization, the G2P worker pool, voices and their blends."""
