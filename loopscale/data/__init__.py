"""Tokens for training: corpora, tokenizers, token shards, packing and the packed-rows store and reader,
random windows, and one way in (run_data.open_run_data). Imports config only."""
