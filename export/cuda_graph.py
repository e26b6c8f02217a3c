

# CUDA graph replay (issue 46, point 1): where the plan is launch-bound at a size
# (CUDA_GRAPHS: plan/launch_bound.hpp decided it at export time, as the reviewer
# decides it), a call at that size's shapes replays the whole plan as one CUDA graph,
# as the reviewer timed it: the call's inputs copied into the graph's input buffers,
# the graph replayed, its outputs cloned, so that no call's outputs alias a later
# call's. The graph is captured on the first such call (after one plain run, outside
# the graph, that also gives the outputs the replay must match) and kept per device,
# dtypes and parameter storage; a capture that fails, or a replay that differs from
# the plain run beyond TOLERANCE, leaves those shapes on plain launches, with a
# warning that says why.
_GRAPH_SHAPES = {tuple(tuple(s) for s in SIZES[name][:len(INPUTS)]) for name in CUDA_GRAPHS if name in SIZES}
_GRAPHS = {}


def _matches(got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if not got.is_floating_point():
        return torch.equal(got, want)
    return torch.allclose(got, want, atol=TOLERANCE["atol"], rtol=TOLERANCE["rtol"], equal_nan=True)


def _capture(tensors):
    """(graph, input buffers, output tensors) replaying ks_forward on `tensors`' shapes,
    or None (with a warning) where it cannot."""
    import warnings
    n = len(INPUTS)
    extension = load_extension()
    buffers = [t.clone() for t in tensors[:n]]
    args = buffers + list(tensors[n:])
    try:
        side = torch.cuda.Stream(device=tensors[0].device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            plain = extension.ks_forward(args, False)  # outside the graph: lazy initialisations
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = extension.ks_forward(args, False)
        graph.replay()
        for k, (got, want) in enumerate(zip(outputs, plain)):
            if not _matches(got, want):
                raise RuntimeError(f"output {k} of its replay differs from plain launches")
    except Exception as e:  # an op that cannot be captured (a host read-back, another stream, ...)
        warnings.warn(f"ModelNew (task {TASK}): plain launches at these shapes, not a CUDA graph: {e}")
        return None
    return graph, buffers, outputs


_LAST_PARAMETERS = [None, None]  # the last call's parameters' addresses, and their key


def _parameters_key(parameters):
    """The parameters' storage, dtypes and shapes as a key. Reading every parameter's
    dtype and shape costs a network of hundreds of parameters tens of microseconds a
    call; their addresses alone a third of that: where they are the last call's, the
    rest is taken as the last call's too. (Not seen: a parameter's data swapped for a
    view of itself with another shape, or for a tensor that reuses its freed address,
    between two calls: the kernel takes the exported shapes in either case.)"""
    addresses = tuple([t.data_ptr() for t in parameters])
    if _LAST_PARAMETERS[0] != addresses:
        _LAST_PARAMETERS[:] = [addresses, tuple([(a, t.dtype, tuple(t.shape)) for a, t in zip(addresses, parameters)])]
    return _LAST_PARAMETERS[1]


def _forward(tensors, general):
    """ks_forward(tensors, general), replayed as one CUDA graph where CUDA_GRAPHS says
    the plan is launch-bound at these shapes."""
    n = len(INPUTS)
    if general or not _GRAPH_SHAPES or not tensors[0].is_cuda or torch.cuda.is_current_stream_capturing():
        return load_extension().ks_forward(tensors, general)
    shapes = tuple(tuple(t.shape) for t in tensors[:n])
    if shapes not in _GRAPH_SHAPES:
        return load_extension().ks_forward(tensors, general)
    key = (shapes, tensors[0].device, tuple(t.dtype for t in tensors[:n]), _parameters_key(tensors[n:]))
    if key not in _GRAPHS:
        _GRAPHS[key] = _capture(tensors)
    entry = _GRAPHS[key]
    if entry is None:
        return load_extension().ks_forward(tensors, general)
    graph, buffers, outputs = entry
    for buffer, t in zip(buffers, tensors[:n]):
        buffer.copy_(t)
    graph.replay()
    return [o.clone() for o in outputs]
