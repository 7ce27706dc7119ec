"""What a deploy ships, pinned: the model repository, its revision, the checkpoint's digest.

No imports here: the command line reads these without loading boto3.
"""

MODEL_REPO = "hexgrad/Kokoro-82M"
MODEL_REVISION = "f3ff3571791e39611d31c381e3a41a3af07b4987"
CHECKPOINT = "kokoro-v1_0.pth"
CHECKPOINT_SHA256 = "496dba118d1a58f5f3db2efc88dbdc216e0483fc89fe6e47ee1f2c53f18ad1e4"
