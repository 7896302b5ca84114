"""Stage 0, what every stage uses: input errors, units and their display, symbolic quantities (the
formulas every pool carries), memoisation and the steps of a long search. Imports nothing else of pycore."""
