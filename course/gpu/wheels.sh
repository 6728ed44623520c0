#!/usr/bin/env bash
# Fill .whl/ (in the repository's root) with the wheels a GPU machine without a network needs
# to install this project as README.md says: the dependencies that a CUDA image with CuPy,
# NumPy, Matplotlib and pytest usually lacks, plus Jupyter's kernel for the lectures. Run it on
# a machine with a network; copy .whl/ along with the checkout; session.sh installs from it.
#   bash course/gpu/wheels.sh [PYTHON_VERSION]      (the GPU machine's `python3 --version`; 3.12)
set -euo pipefail
cd "$(dirname "$0")/../.."
version=${1:-3.12}
rm -rf .whl && mkdir .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64 any; do
    platforms+=(--platform "$p")
done
# pyproject.toml's runtime dependencies that such an image lacks, MPI included (mpich's wheel,
# with the mpi4py built against it), what executing the lecture notebooks takes, and setuptools
# for the editable install (70.1 and later build wheels without the `wheel` package).
python3 -m pip download -q --only-binary=:all: --python-version "$version" --implementation cp "${platforms[@]}" \
    -d .whl "simpy>=4.1" "tomli-w>=1.0" "threadpoolctl>=3" "mpich>=4.2" "mpi4py>=4.0" \
    "nbclient>=0.10" "nbformat>=5.9" "ipykernel>=6" "ipywidgets>=8" "setuptools>=70.1"
if [ -d .git ] && ! grep -qx '/.whl/' .git/info/exclude 2>/dev/null; then
    echo '/.whl/' >> .git/info/exclude         # never committed
fi
echo "$(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1), for Python $version in .whl/"
