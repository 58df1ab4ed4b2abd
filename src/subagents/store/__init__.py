"""Durable state: transcripts now; sidecar records and the Store protocol build on it."""
