"""What autograd keeps for backward, measured: the check behind the memory model (loopscale/model/memory.py)."""

from __future__ import annotations

import weakref

import torch


def kept_for_backward(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the tensors autograd still holds after model(x, x) (bf16 autocast), each storage once and
    parameters left out (they are weights, not activations). Tensors saved by graphs that were freed inside
    the forward (the head's chunks) are gone by then and do not count."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    refs = []

    def pack(t):
        refs.append(weakref.ref(t))
        return t

    with torch.autocast("cpu", dtype=torch.bfloat16), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(x, x)
    storages = {}
    for ref in refs:
        t = ref()
        if t is not None and t.untyped_storage().data_ptr() not in params:
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    del loss
    return sum(storages.values())
