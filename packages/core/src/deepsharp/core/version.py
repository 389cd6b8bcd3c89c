"""deepsharp's version: the one place it is written. Every distribution of the repository takes
its version from here (hatch reads this file), and the others require `deepsharp~=` it."""

__version__ = "0.1.0"
