"""Training: CSP-DAG synthesis, SFT and DRPO, installed as drtriton.training."""
