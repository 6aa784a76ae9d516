"""The looped transformer (transformer.py, head_loss.py) and its exact accounting: parameters and FLOPs
(accounting.py), bytes per device (memory.py). Knows nothing of Lightning, data or launching; imports config and
the injection forms (loopscale/injections/) only."""
