"""`python -m loopscale.train`: the same as `loopscale-train` (its process entry, loopscale/train/command.py)."""

from loopscale.train.command import main

main()
