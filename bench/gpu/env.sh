# shellcheck shell=sh
# Sourced by every suite of bench/gpu/ (bench/gpu/run.sh SUITE), from the
# repository root: the carried release build (build-rel/, with
# build-rel/devlibs: the libgsl, libgslcblas and libjansson the device
# lacks, copied from this machine), the Python side, and NVLink multicast
# off as the device notes require (NCCL_NVLS_ENABLE=0 and the others) in
# every command. Sets vl (the program), o (the results folder: $OUT) and
# record_env.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export VRAMLEDGER_PRELOAD=$PWD/build-rel/libvramledger-preload.so VRAMLEDGER_DATA=$PWD/data
export VRAMLEDGER_PYTHON_DIR=$PWD/python LD_LIBRARY_PATH=$PWD/build-rel/devlibs PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
vl=$PWD/build-rel/vramledger
o=${OUT:-/tmp/out}
# record_env FILE: the GPU, its driver and the Python stack, for a results folder
record_env() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$1"
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)" >> "$1"
}
