"""loopscale: scaling-law experiments for looped (depth-recurrent) transformers."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("loopscale")  # one source: pyproject.toml
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
