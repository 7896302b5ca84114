"""Stage 4, the answers: fit on each GPU, GPUs needed and the plan, the largest batch and sequence, how to
fit, what fits, the comparison and the charts. Each is a search over estimates. Imports the stages before it."""
