"""Save and restore the training state: two generations per rank, each file written
atomically, in a step that all ranks take together, so that no single failure loses the run.

Files: ``DIR/rank{R}.epoch{E}.npz``, rank R's state after E epochs:
  params, velocity   weights and momentum (the same on every rank; each rank keeps a copy
                     so that it can restart on its own)
  *_residual_*       the 1-bit error-feedback residuals (different on every rank)
  meta               epoch counter, global samples trained, the shuffling RNG's state,
                     and the settings that must not change on resume (ranks, model, ...)

One checkpoint, as `mpi_impl.train` takes it after epoch E (train_checkpoints.py):
  1. every rank checks that its state is finite; if any rank's is not, no rank saves
  2. every rank writes its file with :func:`save`: a temporary file, flushed and fsync'd,
     renamed over the final name with os.replace, then the folder fsync'd -- a crash leaves
     the whole new file or none of it, never half a file under a final name
  3. a barrier: now every rank has epoch E
  4. every rank deletes its generations other than E and the one before (:func:`prune`)

Guarantee: at every moment there is an epoch that every rank has -- the previous one until
the barrier, E after it -- and each rank keeps two.  `--resume` takes the newest epoch that
every rank has (:func:`newest_common`), so a rank killed in the middle of step 2 costs one
epoch of work, not the run.

The old layout, one ``rank{R}.npz`` per rank (its epoch is in its meta), is still read; the
first two checkpoints of a resumed run replace it.

Loads never unpickle (allow_pickle=False); a file that is not a checkpoint, or whose
contents do not fit, raises :class:`CheckpointError`, one line naming the file.
"""
import json
import os
import re
from pathlib import Path

import numpy as np

#: the name of a generation; epochs without leading zeros, so one epoch has one name
NAME = re.compile(r"rank(0|[1-9][0-9]*)\.epoch(0|[1-9][0-9]*)\.npz")


class CheckpointError(Exception):
    """A checkpoint file that cannot be used; str() is one line that names the file."""


def path_for(directory, rank, epoch):
    """Where rank's checkpoint of `epoch` lives."""
    return Path(directory) / f"rank{rank}.epoch{epoch}.npz"


def legacy_path(directory, rank):
    """The old layout's single file of rank."""
    return Path(directory) / f"rank{rank}.npz"


def to_numpy(a):
    """NumPy copy of a NumPy or CuPy array."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _fsync_folder(directory):
    """Make renames and deletions in `directory` durable (its entries reach the disk)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(directory, rank, epoch, arrays, meta):
    """Write {name: array} and the JSON-able `meta` dict as rank's checkpoint of `epoch`,
    atomically: after a crash the final file is either complete or absent.  Returns its path."""
    directory = Path(directory)
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True)    # other ranks may make it at once
        _fsync_folder(directory.parent)
    final = path_for(directory, rank, epoch)
    temporary = final.with_name(final.name + ".tmp")
    with open(temporary, "wb") as f:
        np.savez(f, meta=np.array(json.dumps(meta)),
                 **{name: to_numpy(a) for name, a in arrays.items()})
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, final)
    _fsync_folder(directory)
    return final


def _own_generations(directory, rank):
    """{epoch: path} of rank's files in the current layout (complete files only: a
    temporary file has another name)."""
    directory = Path(directory)
    if not directory.is_dir():
        return {}
    found = {}
    for path in directory.iterdir():
        match = NAME.fullmatch(path.name)
        if match and int(match[1]) == rank:
            found[int(match[2])] = path
    return found


def _legacy_epoch(path):
    """The epoch recorded in an old-layout file; CheckpointError if it is unreadable."""
    epoch = read(path)[1].get("epoch")
    if type(epoch) is not int or epoch < 0:
        raise CheckpointError(f"{path}: its meta has no valid epoch ({epoch!r})")
    return epoch


def generations(directory, rank):
    """{epoch: path} of every checkpoint of rank in `directory`, the old layout's
    ``rank{R}.npz`` included (a current-layout file of the same epoch wins).  Raises
    CheckpointError if an old-layout file cannot be read (its epoch is inside)."""
    found = _own_generations(directory, rank)
    old = legacy_path(directory, rank)
    if old.is_file():
        found.setdefault(_legacy_epoch(old), old)
    return found


def newest_common(per_rank):
    """The newest epoch found in every one of `per_rank` (collections of epochs, one per
    rank), or None if there is none."""
    common = set.intersection(*(set(epochs) for epochs in per_rank)) if per_rank else set()
    return max(common) if common else None


def prune(directory, rank, keep):
    """Delete rank's generations whose epoch is not in `keep` (an old-layout file too, when
    its epoch can be read and is not kept), and rank's leftover temporary files; then fsync
    the folder.  Call it only once every rank holds the newest epoch of `keep`."""
    directory = Path(directory)
    doomed = [p for e, p in _own_generations(directory, rank).items() if e not in keep]
    doomed += list(directory.glob(f"rank{rank}.epoch*.npz.tmp"))
    old = legacy_path(directory, rank)
    if old.is_file():
        try:
            if _legacy_epoch(old) not in keep:
                doomed.append(old)
        except CheckpointError:
            pass                                # not ours to judge here; resume reports it
    for path in doomed:
        path.unlink(missing_ok=True)
    if doomed:
        _fsync_folder(directory)


def read(path):
    """(arrays, meta) of one checkpoint file.  Raises CheckpointError, one line naming the
    file, if it is not an .npz archive with a JSON object under "meta" and plain (not
    object) arrays beside it: a truncated file, random bytes, a pickle."""
    def bad(why):
        return CheckpointError(f"{path}: not a usable checkpoint ({why})")
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as error:                  # every way a file can fail to parse
        raise bad(f"truncated or not an .npz archive: {type(error).__name__}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise bad("a single array, not an .npz archive")
    with archive:
        if "meta" not in archive.files:
            raise bad("no meta")
        try:
            arrays = {name: archive[name] for name in archive.files if name != "meta"}
            meta = json.loads(str(archive["meta"]))
        except Exception as error:
            raise bad(f"a damaged or non-numeric entry: {type(error).__name__}") from None
    if not isinstance(meta, dict):
        raise bad("its meta is not a JSON object")
    return arrays, meta


def check(path, arrays, meta, *, epoch, max_epoch, shapes, optional=()):
    """Raise CheckpointError (one line naming `path`) unless the file fits the run:

    meta["epoch"] is an integer equal to `epoch` (the epoch its name says), with
    0 <= epoch <= max_epoch; each array named in `shapes` ({name: (shape, dtype)}) is there
    with that shape and dtype, except that names in `optional` may be missing; there is no
    other array; and every value is finite.
    """
    if type(meta.get("epoch")) is not int or meta["epoch"] != epoch:
        raise CheckpointError(f"{path}: its meta says epoch {meta.get('epoch')!r}, its name {epoch}")
    if not 0 <= epoch <= max_epoch:
        raise CheckpointError(f"{path}: epoch {epoch} is beyond --epochs {max_epoch} "
                              f"(resume with --epochs {epoch} or more)")
    extra = sorted(set(arrays) - set(shapes))
    if extra:
        raise CheckpointError(f"{path}: unexpected arrays {', '.join(extra)} for this model")
    for name, (shape, dtype) in shapes.items():
        if name not in arrays:
            if name in optional:
                continue
            raise CheckpointError(f"{path}: no {name} array")
        a = arrays[name]
        if tuple(a.shape) != tuple(shape) or str(a.dtype) != str(dtype):
            raise CheckpointError(f"{path}: {name} is {a.dtype} {tuple(a.shape)}, the model needs "
                                  f"{dtype} {tuple(shape)}")
        if not np.isfinite(a).all():
            raise CheckpointError(f"{path}: {name} holds NaN or inf")
