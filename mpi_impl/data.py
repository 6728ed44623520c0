"""Data sets for training, and how each rank gets its own shard.

Three sources, all returned as (train, test) pairs of `Dataset` (images as float32 arrays
of shape (N, C, H, W), labels as int64):

- `synthetic`: random Gaussian images labelled by a fixed random "teacher" network, so
  there is a rule to learn and no file to read (the "synthetic data" of benchmark runs).
- `digits`: scikit-learn's 1,797 handwritten digits (8x8 grey images, ten classes). It
  ships inside scikit-learn, so nothing is downloaded (pip install scikit-learn).
- `cifar10`: the CIFAR-10 binary format, for users who have it: files `data_batch_*.bin`
  and `test_batch.bin`, each a run of 3,073-byte records (1 label byte, then 3,072 pixel
  bytes: the red, green and blue 32x32 planes).

Sharding: `shard_indices` gives each rank a disjoint, equal-sized slice of one random
permutation of the training set, decided by the seed alone, so every rank can compute its
shard without talking to the others.
"""
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SOURCES = ("synthetic", "digits", "cifar10")
TEST_FRACTION = 0.2          # for sources without their own test set
SPLIT_SEED = 12345           # the train/test split does not change with --seed


class DataError(ValueError):
    """A data set that cannot be used as asked (missing file, too few samples)."""


@dataclass
class Dataset:
    x: np.ndarray            # (N, C, H, W) float32
    y: np.ndarray            # (N,) int64
    classes: int

    def __len__(self):
        return len(self.y)

    @property
    def shape(self):
        return self.x.shape[1:]


def split(x, y, classes, test_fraction=TEST_FRACTION):
    """Fixed random train/test split (the same for every rank and every --seed)."""
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    n_test = int(round(len(y) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return Dataset(x[train], y[train], classes), Dataset(x[test], y[test], classes)


def synthetic(samples=20480, shape=(1, 8, 8), classes=10, seed=0):
    """Gaussian images; label = the class whose fixed random "teacher" direction has the
    largest dot product with the image (a linear rule, so a small net learns it and does
    as well on the test set as on the training set)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, *shape)).astype(np.float32)
    teacher = rng.standard_normal((int(np.prod(shape)), classes))
    y = (x.reshape(samples, -1) @ teacher).argmax(axis=1).astype(np.int64)
    return split(x, y, classes)


def digits():
    """scikit-learn's 8x8 digits, scaled to [0, 1] and centred."""
    table = _digits_table()
    x = (table[:, :64].astype(np.float32) / 16.0 - 0.5).reshape(-1, 1, 8, 8)
    y = table[:, 64].astype(np.int64)
    return split(x, y, classes=10)


def _digits_table():
    """The digits as one (1797, 65) array: 64 pixel values (0-16), then the label.

    Read straight from the CSV file that ships with scikit-learn when it is there, which is
    what load_digits() reads too, but without importing scikit-learn (a second per rank)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None:
        raise DataError("--data digits needs scikit-learn: pip install scikit-learn")
    csv = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    if csv.exists():
        return np.loadtxt(csv, delimiter=",")
    from sklearn.datasets import load_digits
    bunch = load_digits()
    return np.concatenate([bunch.data, bunch.target[:, None]], axis=1)


RECORD_BYTES = 1 + 3 * 32 * 32
#: the most CIFAR-10 records read from a --data-dir (its training files together; CIFAR-10
#: has 50,000): 100,000 images are 1.2 GB as float32 (mpi_impl/README.md, "Limits")
RECORDS_LIMIT = 100_000


def read_cifar10_file(path):
    """One CIFAR-10 binary file -> (uint8 images (N, 3, 32, 32), int64 labels); a file that is
    not one (a folder, a dangling link, a FIFO that would block, a wrong size, a label outside
    0-9) is a DataError naming it, before any training."""
    path = Path(path)
    if not path.is_file():                       # follows links: a dangling one is not a file
        raise DataError(f"{path}: not a regular file" + (" (a dangling link)" if path.is_symlink() else ""))
    try:
        raw = np.fromfile(path, dtype=np.uint8)
    except OSError as e:
        raise DataError(f"{path}: cannot read it ({e.strerror})") from None
    if raw.size == 0 or raw.size % RECORD_BYTES:
        raise DataError(f"{path}: size {raw.size} bytes is not a multiple of the "
                        f"{RECORD_BYTES}-byte CIFAR-10 record")
    records = raw.reshape(-1, RECORD_BYTES)
    labels = records[:, 0].astype(np.int64)
    if labels.max() >= 10:
        raise DataError(f"{path}: label {labels.max()} out of range 0-9")
    return records[:, 1:].reshape(-1, 3, 32, 32), labels


def cifar10(directory):
    """data_batch_*.bin (train) and test_batch.bin (test, if present) from `directory`."""
    directory = Path(directory) if directory else None
    if directory is None or not directory.is_dir():
        raise DataError(f"--data cifar10 needs --data-dir pointing to the folder with "
                        f"data_batch_*.bin (got {directory})")
    train_files = sorted(directory.glob("data_batch_*.bin"))
    if not train_files:
        raise DataError(f"--data-dir {directory}: no data_batch_*.bin files")
    total = sum(f.stat().st_size for f in train_files if f.is_file())
    if total > RECORDS_LIMIT * RECORD_BYTES:
        raise DataError(f"--data-dir {directory}: its data_batch_*.bin files hold {total:,} bytes, "
                        f"more than the limit of {RECORDS_LIMIT:,} records ({RECORDS_LIMIT * RECORD_BYTES:,} bytes)")
    parts = [read_cifar10_file(f) for f in train_files]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])

    def scale(u8):
        return (u8.astype(np.float32) / 255.0 - 0.5)

    test_file = directory / "test_batch.bin"
    if test_file.exists() or test_file.is_symlink():
        test_images, test_labels = read_cifar10_file(test_file)
        return Dataset(scale(images), labels, 10), Dataset(scale(test_images), test_labels, 10)
    return split(scale(images), labels, classes=10)


def load(source, samples=None, data_dir=None, seed=0):
    """(train, test) for --data SOURCE; `samples` caps the training set size (synthetic:
    sets it)."""
    if source == "synthetic":
        total = int(round((samples or 16384) / (1 - TEST_FRACTION)))
        train, test = synthetic(samples=total, seed=seed)
    elif source == "digits":
        train, test = digits()
    elif source == "cifar10":
        train, test = cifar10(data_dir)
    else:
        raise DataError(f"unknown data source {source!r}; choose from {', '.join(SOURCES)}")
    if samples and source != "synthetic" and samples < len(train):
        train = Dataset(train.x[:samples], train.y[:samples], train.classes)
    return train, test


def shard_indices(n, rank, size, seed):
    """This rank's training sample indices: block `rank` of a seeded permutation of range(n).

    Every shard has n // size samples (the remainder is dropped, so all ranks take the
    same number of steps per epoch). Shards are disjoint and the same on every run.
    """
    per_rank = n // size
    order = np.random.default_rng(seed).permutation(n)
    return order[rank * per_rank:(rank + 1) * per_rank]
