"""Layer-wise curriculum extraction: the student trained layer by layer, shallow to deep, then whole."""
