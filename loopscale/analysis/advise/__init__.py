"""`loopscale advise`: which r, which width and how many tokens under a compute, memory and inference budget,
from a fit record (docs/design.md, "Advice"). One entry point, `advice.advise(fit, compute_flops=..., ...)`;
the modules, bottom to top:

    family      the model family as exact quadratics in the width per r (paper, demo, cpu, custom, power law)
    matching    which family a fit was made for (its recorded model shapes), a named one refused if it differs
    law_sets    the fit's law as parameter sets (point estimate, bootstrap replicates) and its parameters' box:
                the one module that asks which law a fit is
    record_checks  what advise reads from a fit record, checked before anything is computed (one line)
    optimum     the loss along a family and its optimum per r under the constraints (eqs. 1-3)
    break_even  the unique-parameter cap below which looping beats r = 1
    curves      the figure's loss curves and bands
    advice      the advice record per r, the best r or "within the noise", the warnings; `advise`
    text        the table and the lines `loopscale advise` prints
"""
