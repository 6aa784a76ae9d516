"""loopscale: scaling-law experiments for looped (depth-recurrent) transformers."""

__version__ = "0.1.0"
