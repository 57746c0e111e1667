"""Projector methods: the projection ensemble's size, the spectral-norm penalty, the projector-overfitting flag."""
