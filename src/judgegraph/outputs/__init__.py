"""What a run's record is turned into: tables (:mod:`.tables`), the HTML report (:mod:`.html`) and its
sections, graph pictures (:mod:`.drawing`), CSV/Parquet/pandas (:mod:`.export`) and transcripts read
back (:mod:`.transcripts`)."""
