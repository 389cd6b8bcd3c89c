"""The network and what it is made of: layers, losses, optimizers."""
