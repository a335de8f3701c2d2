"""From a verdict to the next generation: the recovery machine, policy, checkpoints (mostly pure)."""
