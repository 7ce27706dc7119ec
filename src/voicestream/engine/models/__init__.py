"""Model files: locate and verify the weights, voices and derived graphs; fetch from the hub."""
