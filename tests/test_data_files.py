"""mpi_impl.data reads CIFAR-10 binary files, and refuses anything else in one line naming
the file, before training: a folder, a dangling link, a FIFO (which would block), a wrong
size, a label outside 0-9 in the training or the test file."""
import os

import numpy as np
import pytest

from mpi_impl.data import RECORD_BYTES, DataError, cifar10


def records(n, label=3):
    raw = np.zeros((n, RECORD_BYTES), np.uint8)
    raw[:, 0] = label
    raw[:, 1:] = np.arange(RECORD_BYTES - 1) % 256
    return raw.tobytes()


def test_a_good_folder_loads(tmp_path):
    (tmp_path / "data_batch_1.bin").write_bytes(records(20))
    (tmp_path / "test_batch.bin").write_bytes(records(5, label=9))
    train, test = cifar10(tmp_path)
    assert len(train) == 20 and len(test) == 5 and test.classes == 10


@pytest.mark.parametrize("make, says", [
    (lambda p: p.mkdir(), "not a regular file"),
    (lambda p: p.symlink_to(p.parent / "gone.bin"), "dangling link"),
    (lambda p: os.mkfifo(p), "not a regular file"),
    (lambda p: p.write_bytes(records(2)[:-7]), "not a multiple"),
    (lambda p: p.write_bytes(records(2, label=255)), "label 255 out of range"),
])
@pytest.mark.parametrize("name", ["data_batch_1.bin", "test_batch.bin"])
def test_a_bad_file_is_one_line_naming_it(tmp_path, make, says, name):
    if name == "test_batch.bin":
        (tmp_path / "data_batch_1.bin").write_bytes(records(4))
    make(tmp_path / name)
    with pytest.raises(DataError, match=says) as error:
        cifar10(tmp_path)
    assert name in str(error.value) and "\n" not in str(error.value)


def test_training_files_above_the_limit_are_refused_before_they_are_read(tmp_path, monkeypatch):
    from mpi_impl import data
    monkeypatch.setattr(data, "RECORDS_LIMIT", 30)
    for k in (1, 2):
        (tmp_path / f"data_batch_{k}.bin").write_bytes(records(20))
    with pytest.raises(DataError, match="limit of 30 records"):
        cifar10(tmp_path)
