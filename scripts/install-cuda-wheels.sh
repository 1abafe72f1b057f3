#!/usr/bin/env bash
# Installs one CUDA release from NVIDIA's PyPI wheels into a project folder
# and lays it out as a toolkit (bin/ include/ lib/ lib64/ nvvm/), so that
# `make CUDA_PATH=.deps/cuda` (the Makefile's fallback) compiles and links the
# CUDA backend on machines without /usr/local/cuda, and without root.
#
#   scripts/install-cuda-wheels.sh          install into .deps/cuda-$RELEASE, link .deps/cuda
#   scripts/install-cuda-wheels.sh --print  print the toolkit folder it would use
#
# Versions are pinned to one release (CUDA 13.0 Update 2) so that nvcc, its
# headers and the libraries agree. A second run finds the stamp and downloads
# nothing. Nothing is installed into any Python environment: pip only unpacks
# the wheels into the folder (--target).
set -euo pipefail
cd "$(dirname "$0")/.."

RELEASE=13.0.2
WHEELS=(
    nvidia-cuda-nvcc==13.0.88      # nvcc, ptxas, fatbinary, nvlink, cudafe++
    nvidia-cuda-crt==13.0.88       # nvcc's crt/ headers
    nvidia-nvvm==13.0.88           # cicc and libnvvm, nvcc's device front end
    nvidia-cuda-runtime==13.0.96   # cuda_runtime.h, libcudart
    nvidia-cuda-cccl==13.0.85      # cub and thrust (backend_cuda.cu uses cub)
    nvidia-cusparse==12.6.3.3      # cusparse.h, libcusparse (ships with 13.0.2)
    nvidia-nvjitlink==13.0.88      # libcusparse's run-time dependency
)
DEPS_DIR=${FSGD_DEPS_DIR:-.deps}
TOP="$DEPS_DIR/cuda-$RELEASE"
STAMP="$TOP/.installed"
want="${WHEELS[*]}"

if [ "${1:-}" = "--print" ]; then
    echo "$TOP"
    exit 0
fi
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    ln -sfn "cuda-$RELEASE" "$DEPS_DIR/cuda"
    exit 0
fi

py=$(command -v python3 || true)
if [ -z "$py" ] || ! "$py" -m pip --version >/dev/null 2>&1; then
    echo "install-cuda-wheels: python3 with pip is needed to fetch NVIDIA's CUDA wheels (apt-get install python3-pip)" >&2
    exit 1
fi

echo "install-cuda-wheels: CUDA $RELEASE from PyPI into $TOP (about 520 MB)"
rm -rf "$TOP"
mkdir -p "$TOP"
# --no-deps: exactly the pinned set, nothing the resolver picks on its own.
if ! "$py" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --no-cache-dir \
        --target "$TOP/wheels" "${WHEELS[@]}"; then
    rm -rf "$TOP"
    echo "install-cuda-wheels: pip could not fetch the CUDA wheels (is PyPI reachable?)" >&2
    exit 1
fi

# The wheels unpack into nvidia/cu13/{bin,include,lib,nvvm}: already a
# toolkit tree, whose bin/nvcc.profile finds nvvm and the cccl headers
# relative to itself. Link its parts to the top so the folder looks like
# /usr/local/cuda, and add the unversioned .so names the linker wants.
tree="$TOP/wheels/nvidia/cu13"
for part in bin include lib nvvm; do
    [ -e "$tree/$part" ] || { echo "install-cuda-wheels: $tree/$part missing after install" >&2; exit 1; }
    ln -sfn "wheels/nvidia/cu13/$part" "$TOP/$part"
done
ln -sfn lib "$TOP/lib64"
for so in "$tree"/lib/lib*.so.*; do
    base=$(basename "$so")
    ln -sfn "$base" "$tree/lib/${base%%.so.*}.so"
done
"$TOP/bin/nvcc" --version | tail -2 | head -1 >/dev/null   # fails here, not in make, if nvcc cannot run
echo "$want" >"$STAMP"
ln -sfn "cuda-$RELEASE" "$DEPS_DIR/cuda"
echo "install-cuda-wheels: CUDA toolkit ready: $DEPS_DIR/cuda ($("$TOP/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 \2/p'))"
