"""The PyTorch runtime (kokoro's KModel): the GPU engine of the production container."""
