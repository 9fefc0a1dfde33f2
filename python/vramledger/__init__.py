"""vramledger's Python side: the measuring suite behind `vramledger validate`
(measure.py). Runs inside the user's Python with PyTorch."""
