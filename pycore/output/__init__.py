"""Stage 5, output: the formulas table, the text and CSV report, the page's JSON entry points and the
command line. Display text is made here. Imports any stage."""
