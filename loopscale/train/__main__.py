"""`python -m loopscale.train`: the same as `loopscale-train`."""

from loopscale.train.entry import main

main()
