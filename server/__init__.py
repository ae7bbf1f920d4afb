"""The DRTriton language server (pygls), installed as drtriton.server."""
