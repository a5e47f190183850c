"""portamem's built-in plugins: the default write-triggers, scorers, extractor, summariser and eviction."""
