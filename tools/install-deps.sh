#!/usr/bin/env bash
# Installs everything ddppo-hpc needs into a virtual environment, on a fresh Debian machine
# or on a cluster login node. Idempotent: a second run takes seconds.
#
#   tools/install-deps.sh [VENV]        (default: .venv)
#
# MPI: an MPI compiler already on the PATH (e.g. after `module load openmpi`) is used as is;
# otherwise, as root, OpenMPI comes from the Debian packages openmpi-bin and libopenmpi-dev.
# Horovod 0.28.1 (the last release) hard-codes C++14, but torch >= 2.1 needs C++17
# (horovod/horovod#3996, fixed on master by #3998, never released): we build it from the
# sdist with the standard raised to 17 and cache the wheel in $DDPPO_CACHE so that later
# installs take seconds.
set -euo pipefail

VENV=${1:-.venv}
PYTHON=${PYTHON:-python3}
CACHE=${DDPPO_CACHE:-$HOME/.cache/ddppo-hpc}
TORCH_VERSION=2.13.0
HOROVOD_VERSION=0.28.1
MATPLOTLIB_VERSION=3.10.3  # analysis plots (Agg backend: no display needed)

say() { printf '[install] %s\n' "$*"; }

if ! command -v mpicc >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "install: no MPI compiler (mpicc) on the PATH; load an MPI module or install openmpi-bin and libopenmpi-dev" >&2
        exit 2
    fi
    say "no mpicc on the PATH: installing OpenMPI from Debian packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
say "MPI: $(command -v mpicc)"

if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtual environment $VENV"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

# torch is pinned: an unpinned torch pulls a multi-GB CUDA build.
"${PIP[@]}" install "torch==$TORCH_VERSION" numpy h5py pyyaml gymnasium \
    "matplotlib==$MATPLOTLIB_VERSION" \
    scikit-build-core nanobind cmake==3.31.6 ninja \
    pytest pytest-timeout hypothesis ruff clang-format==19.1.7
# mpi4py compiles against the mpicc found above; rebuild it when the MPI changes.
"${PIP[@]}" install --no-cache-dir --no-binary mpi4py mpi4py

if ! "$VENV/bin/python" -c "import horovod.torch" >/dev/null 2>&1; then
    mkdir -p "$CACHE/wheels"
    wheel=$(ls "$CACHE"/wheels/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$wheel" ]; then
        say "building Horovod $HOROVOD_VERSION with MPI + PyTorch (about 15 minutes on 2 cores, once)"
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        "${PIP[@]}" download --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$work"
        tar -xzf "$work"/horovod-"$HOROVOD_VERSION".tar.gz -C "$work"
        src="$work/horovod-$HOROVOD_VERSION"
        sed -i 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 17/' \
            "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
        HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
            HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_GLOO=1 \
            MAKEFLAGS="-j$(nproc)" HOROVOD_BUILD_ARCH_FLAGS="" \
            "${PIP[@]}" wheel --no-build-isolation --no-deps -w "$CACHE/wheels" "$src"
        wheel=$(ls "$CACHE"/wheels/horovod-"$HOROVOD_VERSION"-*.whl | head -n 1)
    fi
    say "installing $(basename "$wheel")"
    "${PIP[@]}" install --no-deps "$wheel"
    "${PIP[@]}" install cffi cloudpickle psutil pyyaml packaging
fi
"$VENV/bin/python" -c "import horovod.torch as hvd; assert hvd.mpi_built(), 'Horovod built without MPI'"
say "Horovod OK (MPI built)"
