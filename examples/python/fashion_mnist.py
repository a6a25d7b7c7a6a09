"""Fashion-MNIST and the 784-128-10 MLP shared by the Python examples.

The data is Debian's ``dataset-fashion-mnist`` (gzip'd IDX files), read with
gzip and NumPy: no torchvision, no download.
"""
import gzip
import os
import struct

import numpy as np
import torch
from torch import nn

DATA_DIR = "/usr/share/datasets/fashion-mnist"
IMAGE_PIXELS = 28 * 28
CLASSES = 10
# IDX magic numbers: unsigned bytes, 3 dimensions (images) or 1 (labels).
_IDX_IMAGES, _IDX_LABELS = 0x00000803, 0x00000801


def _read_idx(path, magic, dims):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    head = 4 + 4 * dims
    if len(raw) < head:
        raise ValueError(f"{path}: truncated IDX header")
    fields = struct.unpack(f">{1 + dims}I", raw[:head])
    if fields[0] != magic:
        raise ValueError(f"{path}: IDX magic {fields[0]:#010x}, want {magic:#010x}")
    shape = fields[1:]
    data = np.frombuffer(raw, dtype=np.uint8, offset=head)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {data.size} bytes of data for shape {shape}")
    return data.reshape(shape)


def load(split, data_dir=DATA_DIR):
    """One split of Fashion-MNIST.

    split: "train" (60,000 images) or "t10k" (10,000).
    Returns (images, labels): float32 tensor [N, 784] scaled to [0, 1] and
    int64 tensor [N] of classes 0-9.
    Raises OSError if a file is missing, ValueError if it is not IDX.
    """
    images = _read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"), _IDX_IMAGES, 3)
    labels = _read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"), _IDX_LABELS, 1)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{split}: {images.shape[0]} images but {labels.shape[0]} labels")
    x = torch.from_numpy(images.reshape(-1, IMAGE_PIXELS).astype(np.float32) / 255.0)
    return x, torch.from_numpy(labels.astype(np.int64))


class MLP(nn.Module):
    """784-128-10 perceptron with ReLU: 101,770 float32 parameters.

    forward: x [B, 784] -> logits [B, 10].
    """

    def __init__(self, hidden=128):
        super().__init__()
        self.fc1 = nn.Linear(IMAGE_PIXELS, hidden)
        self.fc2 = nn.Linear(hidden, CLASSES)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def make_model(seed=42):
    """The MLP with weights drawn from `seed`: every peer starts from the same bits."""
    torch.manual_seed(seed)
    return MLP()


def batches(n, batch, seed):
    """Endless mini-batches of indices into a split of n samples.

    Yields int64 tensors [batch]; each epoch is a fresh permutation drawn from
    `seed`, so peers with different seeds see different data.
    """
    rng = np.random.default_rng(seed)
    while True:
        order = torch.from_numpy(rng.permutation(n))
        for i in range(0, n - batch + 1, batch):
            yield order[i:i + batch]


@torch.no_grad()
def accuracy(model, images, labels):
    """Fraction (0-1) of `images` [N, 784] whose argmax logit equals `labels` [N]."""
    return (model(images).argmax(dim=1) == labels).float().mean().item()
