"""Training: the trainer, the fit loop and its callbacks, checkpoints."""
