"""Models and where they come from: shapes, sources (fine-tuned teachers, trained students), loading, capture of features, the device and precision, projections, scoring on dev sets."""
