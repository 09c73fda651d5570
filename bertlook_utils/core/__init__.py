"""core: conventions, encoders, the cache and the package's own source; no data, no analysis."""
