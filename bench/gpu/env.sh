# shellcheck shell=sh
# Sourced by every suite of bench/gpu/ (bench/gpu/run.sh SUITE), from the
# repository root: the carried release build (build-rel/, with
# build-rel/devlibs: libgsl, libgslcblas, libjansson, libmicrohttpd and
# libmicrohttpd's GnuTLS chain, copied from the build machine), the Python
# side, and NVLink multicast
# off as the device notes require (NCCL_NVLS_ENABLE=0 and the others) in
# every command. Sets vl (the program), o (the results folder: $OUT) and
# record_env.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export VRAMLEDGER_PRELOAD=$PWD/build-rel/libvramledger-preload.so VRAMLEDGER_DATA=$PWD/data
# Only the copied libraries this machine's loader cache lacks are put on
# LD_LIBRARY_PATH: one it has (libffi, libgmp: Python's) stays the system's.
vl_libs=${TMPDIR:-/tmp}/vramledger-devlibs
mkdir -p "$vl_libs"
for f in "$PWD"/build-rel/devlibs/*.so*; do
  [ -e "$f" ] || continue
  "$(command -v ldconfig || echo /sbin/ldconfig)" -p 2>/dev/null | grep -q "^[[:space:]]*${f##*/} " || ln -sf "$f" "$vl_libs/"
done
export VRAMLEDGER_PYTHON_DIR=$PWD/python LD_LIBRARY_PATH=$vl_libs PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
vl=$PWD/build-rel/vramledger
o=${OUT:-/tmp/out}
# record_env FILE: the GPU, its driver and the Python stack, for a results folder
record_env() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$1"
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)" >> "$1"
}
