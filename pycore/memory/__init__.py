"""Stage 3, memory: the inputs resolved against the model (setup, parallel layout, precision policy), one
builder per memory pool (model states, optimizer, activations, KV cache, runtime overhead), the moments of a
training step or a serving run, and ``estimate``, which sums the pools live at each moment. Imports the
stages before it."""
