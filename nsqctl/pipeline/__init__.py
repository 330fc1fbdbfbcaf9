"""Data pipeline: archive topics to Parquet, replay archives, trace messages (Spark)."""
