"""Stage 1, the inputs: the one schema of named inputs (URL, CLI, form, CSV), which inputs apply when, and
each framework's defaults for the inputs left at ``auto``. Imports only pycore.base."""
