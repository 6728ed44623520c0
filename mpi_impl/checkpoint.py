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
import hashlib
import json
import os
import re
import zipfile
from pathlib import Path

import numpy as np

from mpi_impl import files

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


def digest(arrays):
    """sha256 (hex) of {name: array}: every array's name, dtype, shape and bytes, by name."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(to_numpy(arrays[name]))
        h.update(json.dumps([name, a.dtype.str, list(a.shape)]).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save(directory, rank, epoch, arrays, meta):
    """Write {name: array} and the JSON-able `meta` dict as rank's checkpoint of `epoch`,
    atomically: after a crash the final file is either complete or absent.  The meta gets
    the arrays' :func:`digest`.  Returns its path."""
    directory = Path(directory)
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True)    # other ranks may make it at once
        _fsync_folder(directory.parent)
    final = path_for(directory, rank, epoch)
    arrays = {name: to_numpy(a) for name, a in arrays.items()}
    meta = {**meta, "digest": digest(arrays)}
    files.write_new(final, lambda f: np.savez(f, meta=np.array(json.dumps(meta)), **arrays),
                    binary=True)
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
    epoch = read(path, shapes={})[1].get("epoch")
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
    doomed += list(directory.glob(f"rank{rank}.epoch*.npz*.tmp"))
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


#: the largest meta a checkpoint may hold (its history grows by one record per epoch)
META_LIMIT = 64 << 20
#: the largest .npy header (numpy writes them in multiples of 64 bytes, short)
HEADER_LIMIT = 1 << 16


def read(path, shapes=None, check_meta=None):
    """(arrays, meta) of one checkpoint file.  Raises CheckpointError, one line naming the
    file, if it is not a regular file holding an .npz archive with a JSON object under
    "meta" and plain (not object) arrays beside it whose :func:`digest` is the meta's: a
    truncated file, random bytes, a pickle, a FIFO, arrays edited after saving.

    shapes ({name: (shape, dtype)}): the arrays the caller can use.  Each member's size
    in the archive's directory and its .npy header are checked against them before it is
    decompressed, so that an array that would inflate beyond what the model needs (a
    decompression bomb) is refused unread; another name is refused too.  shapes={} reads
    the meta alone (no digest check); None reads whatever arrays there are.  check_meta(meta),
    if given, runs before any array is read (it raises CheckpointError to refuse the file)."""
    def bad(why):
        return CheckpointError(f"{files.printable(path)}: not a usable checkpoint ({why})")
    try:
        with files.open_regular(path) as f, zipfile.ZipFile(f) as archive:
            members = {info.filename[:-4]: info for info in archive.infolist()
                       if info.filename.endswith(".npy")}
            if "meta" not in members:
                raise bad("no meta")
            meta = json.loads(str(_member(archive, members["meta"], ((), None), META_LIMIT)[()]))
            if not isinstance(meta, dict):
                raise bad("its meta is not a JSON object")
            if check_meta:
                check_meta(meta)
            names = sorted(set(members) - {"meta"})
            if shapes and set(names) - set(shapes):
                raise bad(f"unexpected arrays {', '.join(sorted(set(names) - set(shapes)))} "
                          f"for this model")
            if shapes == {}:
                names = []
            arrays = {n: _member(archive, members[n], shapes[n] if shapes else None) for n in names}
    except files.FileRefused as error:
        raise CheckpointError(str(error)) from None
    except CheckpointError:
        raise
    except _Refused as why:
        raise bad(str(why)) from None
    except Exception as error:                  # every way a file can fail to parse
        raise bad(f"truncated, damaged or not an .npz archive: {type(error).__name__}") from None
    if shapes != {} and meta.get("digest") != digest(arrays):
        raise bad("its arrays do not match the digest in its meta: damaged or edited"
                  if "digest" in meta else "no digest of its arrays in its meta")
    return arrays, meta


class _Refused(Exception):
    """A member of the archive that read() will not decompress (why, in a few words)."""


def _member(archive, info, want, limit=None):
    """The array in member `info` of `archive`, after checking, before decompressing it,
    that it is what `want` = (shape, dtype) says (None: any array; a dtype of None: any
    dtype of that shape, up to `limit` bytes)."""
    name = info.filename[:-4]
    shape, dtype = want if want is not None else (None, None)
    if dtype is not None:
        limit = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if limit is not None and info.file_size > limit + HEADER_LIMIT:
        raise _Refused(f"{name} inflates to {info.file_size} bytes, more than the "
                       f"{limit + HEADER_LIMIT} its place can take")
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        header = {(1, 0): np.lib.format.read_array_header_1_0,
                  (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if header is None:
            raise _Refused(f"{name}: .npy format {version}")
        got_shape, _, got_dtype = header(member, max_header_size=HEADER_LIMIT)
    if got_dtype.hasobject:
        raise _Refused(f"{name} holds Python objects")
    if want is not None and (tuple(got_shape) != tuple(shape) or
                             (dtype is not None and got_dtype != np.dtype(dtype))):
        raise _Refused(f"{name} is {got_dtype} {tuple(got_shape)}, the model needs "
                       f"{dtype or 'an array of'} {tuple(shape)}")
    if limit is not None and int(np.prod(got_shape, dtype=np.int64)) * got_dtype.itemsize > limit:
        raise _Refused(f"{name} holds more than {limit} bytes")
    with archive.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False, max_header_size=HEADER_LIMIT)


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
