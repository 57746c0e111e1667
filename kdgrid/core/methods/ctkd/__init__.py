"""CTKD (Li et al., AAAI 2023): a learned soft-label temperature trained through gradient reversal."""
