"""LKD: loss weights learned by one-step lookahead on a held-out split of the training data."""
