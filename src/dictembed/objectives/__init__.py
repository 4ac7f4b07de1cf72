"""Training objectives: each is an nn.Module whose forward(batch) returns a dict with "loss"."""
