"""DistributedSampler rules: shard shuffled loaders under DDP, call `set_epoch`."""
