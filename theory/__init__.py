"""Pure mathematics of the paper: sphere geometry, harmonics, kernels, targets, attention semantics and bounds.

float64 numpy/scipy/sympy throughout; imports nothing else of ours.
"""
