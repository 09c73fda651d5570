"""engine: the one batching path: attention streamed through reducers, block by block, into the cache."""
