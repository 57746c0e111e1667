"""ALP-KD (Passban et al., AAAI 2021): attention over the teacher's layers per student layer."""
