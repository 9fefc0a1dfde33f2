"""The scratch memory of ATen's CUDA reductions, for the tracer.

A reduction kernel of ATen (sum, mean, amax, norm, ...; aten/src/ATen/
native/cuda/Reduce.cuh) picks a launch configuration from the shape of the
reduction and the device (setReductionConfig). When one output's inputs
are split over several thread blocks (a column sum over many rows: the
gradient of a Linear layer's bias), the blocks meet in global memory: the
kernel takes two blocks from the caching allocator for the launch (the
partial results, ReduceConfig::global_memory_size(), and a semaphore per
block column, semaphore_size()) and gives them back when it returns. No
ATen op returns them, so a trace of the ops does not see them; they move
peak reserved (a 132 MiB block per MLP backward on StarCoder2-3B:
bench/results/dry-run/raw.jsonl:reserved/README.md).

transients(...) follows setReductionConfig step by step for a contiguous
(or strided) input; the device is given as its SM count and threads per
SM (the H200's by default: REFERENCE_SMS). Checked against the
allocator's own history on an H200 over a grid of shapes, dtypes and
dimensions (bench/results/cuda-reduce/).
"""

MAX_THREADS = 512  # mnt_wrapper<T>::MAX_NUM_THREADS (256 for complex double)
WARP = 32
MIN_VALUES_PER_THREAD = 16
MAX_VALUES_PER_THREAD = 256
INPUT_VEC = 4  # ReduceConfig::input_vec_size (vt0 4: the check on the 2,040 H200 cases holds with it)

# The card a trace stands for when nothing names one: the H200, the card the
# model is calibrated on, with the figures of its entry in the GPU catalog
# (data/gpus.json: sm_count, max_threads_per_sm; tests/python checks that they
# agree). `vramledger trace` hands the tracer the catalog's figures itself
# (VRAMLEDGER_TRACE_SMS, VRAMLEDGER_TRACE_THREADS_PER_SM); these serve a tracer
# started without it (vramledger.dry_run).
REFERENCE_SMS = 132
REFERENCE_THREADS_PER_SM = 2048


def _last_pow2(n):
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def _div_up(a, b):
    return (a + b - 1) // b


def iter_dims(shape, strides, reduced):
    """TensorIterator's view of a reduction: the dimensions of size 1
    dropped, the reduced ones first, each group from the fastest stride
    (reorder_dimensions), neighbours that are contiguous in the input
    merged (coalesce_dimensions). Returns [(size, stride, is_reduced)],
    strides in elements."""
    dims = [(shape[d], strides[d], d in reduced) for d in range(len(shape)) if shape[d] != 1]
    dims.sort(key=lambda x: (not x[2], x[1], x[0]))
    out = []
    for size, stride, red in dims:
        if out and out[-1][2] == red and out[-1][0] * out[-1][1] == stride:
            s, st, r = out[-1]
            out[-1] = (s * size, st, r)
        else:
            out.append((size, stride, red))
    return out


def _output_vec_size(dims, num_reduce):
    """get_output_vec_size: 4, halved until it divides the first kept
    dimension and every other input stride (the base address is taken as
    aligned: the caching allocator's blocks are)."""
    vec = 4

    def fit(n):
        nonlocal vec
        while n % vec:
            vec //= 2
    fit(dims[num_reduce][0])
    for j, (_, stride, _) in enumerate(dims):
        if j != num_reduce:
            fit(stride)
    return vec


def config(shape, strides, reduced, acc_bytes, sms=REFERENCE_SMS,
           threads_per_sm=REFERENCE_THREADS_PER_SM):
    """setReductionConfig for one input of `shape` and `strides` (elements)
    reduced over the dimensions in `reduced`, as one launch. Returns a
    dict: the block, the grid, ctas_per_output and the two scratch sizes
    in bytes."""
    return _config(iter_dims(shape, strides, set(reduced)), acc_bytes, sms, threads_per_sm)


def split_32bit(dims, elem_bytes):
    """TensorIterator::with_32bit_indexing: while an operand's last byte
    lies beyond INT32_MAX, the dimension of the largest extent (the last
    of equals: get_dim_to_split) is halved, each half a launch of its
    own. Returns the launches' dims, in order."""
    limit = (1 << 31) - 1
    todo, out = [dims], []
    while todo:
        d = todo.pop()
        n = 1
        for size, _, _ in d:
            n *= size
        if n <= limit and 1 + sum((size - 1) * stride * elem_bytes for size, stride, _ in d) <= limit:
            out.append(d)
            continue
        k = max(range(len(d)), key=lambda i: ((d[i][0] - 1) * d[i][1], i))
        size, stride, red = d[k]
        first = list(d)
        first[k] = (size // 2, stride, red)
        second = list(d)
        second[k] = (size - size // 2, stride, red)
        todo += [second, first]  # the first half is launched first
    return out


def _config(dims, acc_bytes, sms, threads_per_sm):
    num_outputs = 1
    inputs = 1
    for size, _, red in dims:
        if red:
            inputs *= size
        else:
            num_outputs *= size
    num_reduce = sum(1 for d in dims if d[2])
    c = {"num_outputs": num_outputs, "num_inputs": inputs, "step_input": 1, "step_output": 1,
         "ctas_per_output": 1, "input_mult": [0, 0, 0], "output_mult": [0, 0], "output_vec": 1}
    if not dims:
        fastest_on_reduce, fastest_stride, dim0, dim1 = True, 1, 1, 1
    else:
        fastest_on_reduce = num_reduce == len(dims) or (
            num_reduce > 0 and dims[0][1] < dims[num_reduce][1])
        if num_reduce == 0:
            fastest_on_reduce = False
        if fastest_on_reduce:
            dim0, dim1, fastest_stride = inputs, num_outputs, dims[0][1]
        else:
            dim0, dim1, fastest_stride = num_outputs, inputs, dims[num_reduce][1]
    if fastest_stride == 1 and dims:
        if fastest_on_reduce and dim0 > 128 and num_reduce == 1:
            dim0 //= INPUT_VEC  # "vectorize along input"
        elif not fastest_on_reduce:
            c["output_vec"] = _output_vec_size(dims, num_reduce)
            dim0 //= c["output_vec"]
    # set_block_dimension
    max_threads = MAX_THREADS // c["output_vec"]
    d0 = _last_pow2(dim0) if dim0 < max_threads else max_threads
    d1 = _last_pow2(dim1) if dim1 < max_threads else max_threads
    bw = min(d0, WARP)
    bh = min(d1, max_threads // bw)
    bw = min(d0, max_threads // bh)
    c["block"] = (bw, bh)
    threads = bw * bh

    def split_input(n):
        step = c["step_input"]
        c["step_input"] *= n
        return step

    def split_output(n):
        step = c["step_output"]
        c["step_output"] *= n
        return step

    def values_per_thread():
        return _div_up(inputs, c["step_input"])

    def grid_x():
        return _div_up(num_outputs // c["output_vec"], c["step_output"])

    if not dims or fastest_on_reduce:
        c["input_mult"][0] = split_input(bw)
    else:
        c["output_mult"][0] = split_output(bw)
    if values_per_thread() >= bh * 16 or values_per_thread() >= MAX_VALUES_PER_THREAD:
        c["input_mult"][1] = split_input(bh)
    else:
        c["output_mult"][1] = split_output(bh)
    target = sms * (threads_per_sm // threads)
    grid = grid_x()
    if c["input_mult"][1] != 0 and values_per_thread() >= MAX_VALUES_PER_THREAD and grid <= target:
        a = _div_up(target, grid)
        b = _div_up(values_per_thread(), MIN_VALUES_PER_THREAD)
        d = _div_up(values_per_thread(), MAX_VALUES_PER_THREAD)
        c["ctas_per_output"] = max(min(a, b), d)
        if c["ctas_per_output"] > 1:
            c["input_mult"][2] = split_input(c["ctas_per_output"])
    c["grid"] = (grid_x(), c["ctas_per_output"])
    glob = sem = 0
    if c["input_mult"][2] != 0:  # should_global_reduce
        glob = acc_bytes * num_outputs * c["ctas_per_output"]
        if c["input_mult"][0] == 0:  # !should_block_x_reduce
            glob *= bw * c["output_vec"]
        sem = 4 * c["grid"][0]  # sizeof(int) per block column
    c["global_bytes"] = glob
    c["semaphore_bytes"] = sem
    return c


def transients(shape, strides, reduced, acc_bytes, elem_bytes, sms=REFERENCE_SMS,
               threads_per_sm=REFERENCE_THREADS_PER_SM):
    """The blocks the kernels take from the caching allocator, in order
    (each launch's partial results, then its semaphores; both freed when
    it returns): a list of byte counts, empty when the reduction stays
    within a block."""
    if not shape or any(s == 0 for s in shape):
        return []
    out = []
    for dims in split_32bit(iter_dims(shape, strides, set(reduced)), elem_bytes):
        c = _config(dims, acc_bytes, sms, threads_per_sm)
        out += [b for b in (c["global_bytes"], c["semaphore_bytes"]) if b]
    return out
