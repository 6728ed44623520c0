"""Save and restore the training state, one file per rank, written atomically.

What a rank needs to carry on exactly where it stopped:
  params, velocity   weights and momentum (the same on every rank; each rank keeps a copy
                     so that it can restart on its own)
  residual_*         the 1-bit error-feedback residuals (different on every rank)
  meta               epoch counter, global samples trained, the shuffling RNG's state,
                     and the settings that must not change on resume (ranks, model, ...)

Atomic: each file is written to a temporary name, flushed to disk, then renamed over the
old one with os.replace, so a crash leaves either the old checkpoint or the new one, never
half a file. Ranks write their own files independently, so after a crash they may disagree
on the epoch; `train.py` checks that they agree before resuming.
"""
import json
import os
from pathlib import Path

import numpy as np


def path_for(directory, rank):
    return Path(directory) / f"rank{rank}.npz"


def to_numpy(a):
    """NumPy copy of a NumPy or CuPy array."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


def save(directory, rank, arrays, meta):
    """Write {name: array} and the JSON-able `meta` dict as rank's checkpoint."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = path_for(directory, rank)
    temporary = final.with_name(final.name + ".tmp")
    with open(temporary, "wb") as f:
        np.savez(f, meta=np.array(json.dumps(meta)),
                 **{name: to_numpy(a) for name, a in arrays.items()})
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, final)


def load(directory, rank):
    """(arrays, meta) from rank's checkpoint, or None if there is none."""
    path = path_for(directory, rank)
    if not path.exists():
        return None
    with np.load(path) as f:
        arrays = {name: f[name] for name in f.files if name != "meta"}
        meta = json.loads(str(f["meta"]))
    return arrays, meta
