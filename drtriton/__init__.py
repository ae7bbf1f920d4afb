"""DRTriton: turn PyTorch modules into fast, verified Triton kernels.

Importing the package is cheap on purpose (no torch, no triton): worker processes import it
before they set up their sandbox, and the language server imports it at start-up.
"""

__version__ = "0.1.0"
