"""AdaKD-style example weights (Ganguly et al., 2024): the soft loss of each example weighted by the teacher's difficulty."""
