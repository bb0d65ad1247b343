"""The data model every layer shares: frames (the one contract between ingest, engine and reports),
findings, the analysis result, rank sets, the vocabulary, the library's exceptions. No click, no file reading."""
